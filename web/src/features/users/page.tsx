import { useState, type FormEvent } from "react";
import { newPasswordSchema } from "../../../../src/protocol/users.schema.js";
import { ROLES } from "../../../../src/protocol/roles.js";
import { RoleNote, useCan, useMe } from "../../api/roles.js";
import type { Role, UserView } from "../../api/types.js";
import { ConfirmDialog } from "../../components/confirm-dialog.js";
import { DeleteDialog } from "../../components/delete-dialog.js";
import { FormError, humanError, invalidProps } from "../../components/form-error.js";
import { RelativeTime } from "../../components/relative-time.js";
import { QueryView } from "../../components/states.js";
import { usePageTitle } from "../../page-title.js";
import { useCreateUser, useDeleteUser, useUpdateUser } from "./mutations.js";
import { useUsers } from "./queries.js";
import { TableHead } from "../../components/table-head.js";

/** The labels of the users' fields by wire name: how an API error names the field. */
const USER_LABELS = { username: "Username", password: "Password", role: "Role", disabled: "Disabled" } as const;

/** What each role may do, in a sentence (README "Users, roles and tokens"). */
const ROLE_MEANING: Record<Role, string> = {
  viewer: "reads everything but secrets",
  operator: "+ push, start, stop, bind commands, config downloads",
  admin: "+ every write: configs, nodes, pairs, settings, backups",
  owner: "+ users and roles",
};

/**
 * Users (owners only; the navigation shows it to no one else): the list with role, state and
 * creation time; create (username, password, role); per user: change role, disable or enable,
 * reset the password, delete (confirmed). The API's refusals show by field, e.g. the last
 * enabled owner cannot be demoted, disabled or deleted (409).
 */
export function UsersPage() {
  usePageTitle("Users");
  const can = useCan("listUsers");
  const query = useUsers(can.allowed);
  return (
    <section aria-labelledby="users-title">
      <h1 id="users-title">Users</h1>
      <RoleNote can={can} what="users and roles are managed by owners" />
      {can.allowed && (
        <>
          <CreateUserForm />
          <section className="card" aria-labelledby="user-list-title">
            <h2 id="user-list-title">All users</h2>
            <QueryView query={query} loadingLabel="Loading users…">
              {(data) => <UsersTable users={data.users} />}
            </QueryView>
          </section>
        </>
      )}
    </section>
  );
}

function RoleSelect({ id, value, onChange, label, disabled = false }: { id: string; value: Role; onChange: (role: Role) => void; label?: string; disabled?: boolean }) {
  return (
    <select id={id} value={value} disabled={disabled} aria-label={label} data-op={label === undefined ? undefined : "updateUser"} onChange={(e) => onChange(e.target.value as Role)}>
      {ROLES.map((r) => (
        <option key={r} value={r}>
          {r}
        </option>
      ))}
    </select>
  );
}

/** New user: username, password (at least 12 characters), role. An edit clears the last error. */
function CreateUserForm() {
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [role, setRole] = useState<Role>("viewer");
  const create = useCreateUser();
  const edited = <T,>(set: (v: T) => void) => (v: T) => {
    if (create.isError) create.reset();
    set(v);
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate(
      { username: username.trim(), password, role },
      {
        onSuccess: () => {
          setUsername("");
          setPassword("");
        },
      },
    );
  };
  const invalid = (field: keyof typeof USER_LABELS) => invalidProps(create.error, USER_LABELS, field, "create-user-error");
  const minLength = newPasswordSchema.minLength ?? undefined;
  return (
    <form className="card form" onSubmit={submit} aria-labelledby="create-user-title">
      <h2 id="create-user-title">New user</h2>
      <div className="form-row">
        <div>
          <label htmlFor="user-name">Username</label>
          <input id="user-name" autoComplete="off" value={username} maxLength={64} onChange={(e) => edited(setUsername)(e.target.value)} required {...invalid("username")} />
        </div>
        <div>
          <label htmlFor="user-password">Password</label>
          <input id="user-password" type="password" autoComplete="new-password" value={password} onChange={(e) => edited(setPassword)(e.target.value)} required {...invalid("password")} />
        </div>
        <div>
          <label htmlFor="user-role">Role</label>
          <RoleSelect id="user-role" value={role} onChange={edited(setRole)} />
        </div>
        <div className="form-row-action">
          <button type="submit" className="primary" data-op="createUser" disabled={create.isPending || username.trim() === "" || password === ""}>
            Create user
          </button>
        </div>
      </div>
      <ul className="role-legend small" aria-label="What each role may do">
        {ROLES.map((r) => (
          <li key={r}>
            <strong>{r}</strong>: {ROLE_MEANING[r]}
          </li>
        ))}
      </ul>
      <p className="muted small">
        Usernames: letters, digits and ._@-, up to 64 characters. Passwords: at least {minLength} characters.
      </p>
      <FormError error={create.error} labels={USER_LABELS} id="create-user-error" />
    </form>
  );
}

function UsersTable({ users }: { users: UserView[] }) {
  const update = useUpdateUser();
  const myId = useMe().data?.user.user_id;
  const [resetting, setResetting] = useState<UserView | null>(null);
  const [deleting, setDeleting] = useState<UserView | null>(null);
  const [failed, setFailed] = useState<string | null>(null);
  const change = (user: UserView, body: { role?: Role; disabled?: boolean }) => {
    setFailed(user.username);
    update.mutate({ user, body });
  };
  return (
    <>
      {update.isError && (
        <p className="form-error" role="alert">
          {failed}: {humanError(update.error, USER_LABELS)}
        </p>
      )}
      <div className="table-wrap">
        <table className="table stack-table">
          <caption className="visually-hidden">Users</caption>
          <TableHead columns={["Username", "Role", "State", "Created"]} hidden="Actions" />
          <tbody>
            {users.map((u) => (
              <UserRow key={u.user_id} user={u} me={u.user_id === myId} busy={update.isPending} onChange={(body) => change(u, body)} onReset={() => setResetting(u)} onDelete={() => setDeleting(u)} />
            ))}
          </tbody>
        </table>
      </div>
      <ResetPasswordDialog user={resetting} onClose={() => setResetting(null)} />
      <DeleteUserDialog user={deleting} onClose={() => setDeleting(null)} />
    </>
  );
}

/** One user: name, role (changed at once), state, creation; disable or enable, reset password, delete. */
function UserRow(p: { user: UserView; me: boolean; busy: boolean; onChange: (body: { role?: Role; disabled?: boolean }) => void; onReset: () => void; onDelete: () => void }) {
  const { user: u, me, busy, onChange, onReset, onDelete } = p;
  return (
    <tr>
      <th scope="row">
        {u.username}
        {me && <span className="muted"> (you)</span>}
      </th>
      <td data-label="Role">
        <RoleSelect id={`role-${u.user_id}`} label={`Role of ${u.username}`} value={u.role} disabled={busy} onChange={(role) => onChange({ role })} />
      </td>
      <td data-label="State">{u.disabled ? <span className="badge badge-offline">disabled</span> : <span className="badge badge-online">enabled</span>}</td>
      <td data-label="Created">
        <RelativeTime iso={u.created_at} />
      </td>
      <td className="actions">
        <div className="actions">
        <button type="button" data-op="updateUser" aria-label={`${u.disabled ? "Enable" : "Disable"} ${u.username}`} disabled={busy} onClick={() => onChange({ disabled: !u.disabled })}>
          {u.disabled ? "Enable" : "Disable"}
        </button>
        <button type="button" data-op="updateUser" aria-label={`Reset password of ${u.username}`} onClick={onReset}>
          Reset password
        </button>
        <button type="button" data-op="deleteUser" className="danger-outline" aria-label={`Delete user ${u.username}`} onClick={onDelete}>
          Delete
        </button>
        </div>
      </td>
    </tr>
  );
}

/** A new password for `user` (open while set); their sessions stay, the old password stops working. */
function ResetPasswordDialog({ user, onClose }: { user: UserView | null; onClose: () => void }) {
  const update = useUpdateUser();
  const [password, setPassword] = useState("");
  const close = () => {
    setPassword("");
    update.reset();
    onClose();
  };
  return (
    <ConfirmDialog
      open={user !== null}
      title={`Reset the password of ${user?.username ?? ""}`}
      confirmLabel="Set password"
      busy={update.isPending || password === ""}
      onConfirm={() => user && update.mutate({ user, body: { password } }, { onSuccess: close })}
      onCancel={close}
    >
      <label htmlFor="reset-password">New password</label>
      <input
        id="reset-password"
        type="password"
        autoComplete="new-password"
        value={password}
        onChange={(e) => {
          if (update.isError) update.reset();
          setPassword(e.target.value);
        }}
        {...invalidProps(update.error, { password: "New password" }, "password", "reset-password-error")}
      />
      <FormError error={update.error} labels={{ password: "New password" }} id="reset-password-error" />
    </ConfirmDialog>
  );
}

/** Confirms deleting `user`: their sessions, tokens and open streams end at once. */
function DeleteUserDialog({ user, onClose }: { user: UserView | null; onClose: () => void }) {
  return (
    <DeleteDialog item={user} what="user" nameOf={(u) => u.username} remove={useDeleteUser()} onClose={onClose} labels={USER_LABELS}>
      <p>Their sessions, personal access tokens and open streams end at once. What they changed stays.</p>
    </DeleteDialog>
  );
}
