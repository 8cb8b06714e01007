/** The writes on users: the cached list follows each answer at once (no event announces them). */
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { api } from "../../api/client.js";
import { keys } from "../../api/keys.js";
import type { CreateUserBody, UpdateUserBody, UserListAnswer, UserView } from "../../api/types.js";

/** Puts `user` into the cached list in its place by username (new users join it). */
function withUser(old: UserListAnswer | undefined, user: UserView): UserListAnswer | undefined {
  if (old === undefined) return old;
  const rest = old.users.filter((u) => u.user_id !== user.user_id);
  return { users: [...rest, user].sort((a, b) => a.username.localeCompare(b.username)) };
}

/** `POST /api/v1/users`. */
export function useCreateUser() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (body: CreateUserBody) => api.createUser({ body }),
    onSuccess: (user) => queryClient.setQueryData<UserListAnswer>(keys.users, (old) => withUser(old, user)),
  });
}

/**
 * `PATCH /api/v1/users/{user_id}` (role, password or disabled). A change of the signed-in user's
 * own role changes what the console offers, so "who am I" is read again.
 */
export function useUpdateUser() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: ({ user, body }: { user: UserView; body: UpdateUserBody }) => api.updateUser({ params: { user_id: user.user_id }, body }),
    onSuccess: (user) => {
      queryClient.setQueryData<UserListAnswer>(keys.users, (old) => withUser(old, user));
      void queryClient.invalidateQueries({ queryKey: keys.me });
    },
  });
}

/** `DELETE /api/v1/users/{user_id}`; the user leaves the cached list. */
export function useDeleteUser() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (user: UserView) => api.deleteUser({ params: { user_id: user.user_id } }),
    onSuccess: (_v, user) => queryClient.setQueryData<UserListAnswer>(keys.users, (old) => old && { users: old.users.filter((u) => u.user_id !== user.user_id) }),
  });
}
