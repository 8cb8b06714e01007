import { hashPassword } from "../domain/tokens.js";
import { AppError } from "../errors.js";
import { isoTime, type Clock } from "../lib/clock.js";
import { newId } from "../protocol/ids.js";
import type { Role } from "../protocol/roles.js";
import type { UpdateUserBody, UserView } from "../protocol/users.schema.js";
import type { Store } from "../store/db.js";
import type { UserRow } from "../store/schema.js";
import * as accessTokensRepo from "../store/access-tokens.repository.js";
import * as usersRepo from "../store/users.repository.js";
import type { AuthService, Principal } from "./auth.service.js";

export interface UsersServiceDeps {
  store: Store;
  clock: Clock;
  /** Ends sessions' SSE streams when a user is disabled or deleted. */
  auth: Pick<AuthService, "sessionsEnded">;
  /** scrypt's N for new password hashes (Settings `passwordScryptN`); default OWASP's 2^17. */
  passwordScryptN?: number;
}

/** The API's view of a stored user (never the password hash). */
export function userView(row: UserRow): UserView {
  return { user_id: row.user_id, username: row.username, role: row.role, disabled: row.disabled === 1, created_at: isoTime(row.created_at), updated_at: isoTime(row.updated_at) };
}

/**
 * Users and their roles (README "Users, roles and tokens"), managed by owners. A change applies
 * on the caller's next request (roles are read on every request); disabling or deleting a user
 * ends their sessions, stops their access tokens and ends their open SSE streams at once. The last enabled owner cannot be removed,
 * demoted or disabled.
 */
export class UsersService {
  readonly #d: UsersServiceDeps;

  constructor(deps: UsersServiceDeps) {
    this.#d = deps;
  }

  /** Every user, by name. */
  async list(): Promise<UserView[]> {
    return (await usersRepo.listUsers(this.#d.store.db)).map(userView);
  }

  /**
   * Creates a user with a password.
   * @throws AppError CONFLICT (details `{ field: "username" }`) when the name is taken (any case)
   */
  async create(input: { username: string; password: string; role: Role }): Promise<UserView> {
    const hash = await hashPassword(input.password, this.#d.passwordScryptN);
    const now = this.#d.clock.now();
    const row: UserRow = { user_id: newId("usr"), username: input.username, password_hash: hash, role: input.role, disabled: 0, created_at: now, updated_at: now };
    await this.#d.store.transaction(async (trx) => {
      if ((await usersRepo.findUserByName(trx, input.username)) !== undefined) {
        throw new AppError("CONFLICT", `a user named ${input.username} exists already`, { field: "username" });
      }
      await usersRepo.insertUser(trx, row);
    });
    return userView(row);
  }

  /**
   * Changes a user's role, password or disabled flag. Disabling, or a new password set by
   * someone else, ends the user's sessions (and their SSE streams) at once.
   * @throws AppError NOT_FOUND (no such user), CONFLICT (details `{ reason: "last_owner" }`) when
   *   the change would leave no enabled owner
   */
  async update(userId: string, patch: UpdateUserBody, actor: Principal): Promise<UserView> {
    const password_hash = patch.password === undefined ? undefined : await hashPassword(patch.password, this.#d.passwordScryptN);
    const now = this.#d.clock.now();
    const ended: string[] = [];
    const row = await this.#d.store.transaction(async (trx) => {
      const user = await this.#require(trx, userId);
      const demoted = patch.role !== undefined && patch.role !== "owner";
      if (user.role === "owner" && user.disabled === 0 && (demoted || patch.disabled === true)) await this.#keepAnOwner(trx);
      const changes = {
        ...(patch.role === undefined ? {} : { role: patch.role }),
        ...(patch.disabled === undefined ? {} : { disabled: patch.disabled ? 1 : 0 }),
        ...(password_hash === undefined ? {} : { password_hash }),
      };
      await usersRepo.updateUser(trx, userId, changes, now);
      if (patch.disabled === true || (password_hash !== undefined && userId !== actor.user_id)) {
        ended.push(...(await usersRepo.sessionKeysOf(trx, userId)));
        await usersRepo.deleteSessionsOf(trx, userId);
      }
      // A disabled user's tokens are refused from now on (checked at each use); their streams end now.
      if (patch.disabled === true) ended.push(...(await accessTokensRepo.tokenKeysOf(trx, userId)));
      return this.#require(trx, userId);
    });
    this.#d.auth.sessionsEnded(ended);
    return userView(row);
  }

  /**
   * Deletes a user; their sessions and SSE streams end at once.
   * @throws AppError NOT_FOUND, CONFLICT (details `{ reason: "last_owner" }`) for the last enabled owner
   */
  async delete(userId: string): Promise<void> {
    const ended = await this.#d.store.transaction(async (trx) => {
      const user = await this.#require(trx, userId);
      if (user.role === "owner" && user.disabled === 0) await this.#keepAnOwner(trx);
      const keys = [...(await usersRepo.sessionKeysOf(trx, userId)), ...(await accessTokensRepo.tokenKeysOf(trx, userId))];
      await usersRepo.deleteUser(trx, userId);
      return keys;
    });
    this.#d.auth.sessionsEnded(ended);
  }

  async #require(db: Parameters<typeof usersRepo.findUser>[0], userId: string): Promise<UserRow> {
    const user = await usersRepo.findUser(db, userId);
    if (user === undefined) throw new AppError("NOT_FOUND", `no user ${userId}`);
    return user;
  }

  /** @throws AppError CONFLICT when the user about to stop being an enabled owner is the last one */
  async #keepAnOwner(db: Parameters<typeof usersRepo.countEnabledOwners>[0]): Promise<void> {
    if ((await usersRepo.countEnabledOwners(db)) <= 1) {
      throw new AppError("CONFLICT", "this is the last enabled owner: make another user owner first", { reason: "last_owner" });
    }
  }
}
