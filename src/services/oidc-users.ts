import { createHash } from "node:crypto";
import type { OidcSettings } from "../config.js";
import { AppError } from "../errors.js";
import { newId } from "../protocol/ids.js";
import type { SsoFailureReason } from "../protocol/oidc.schema.js";
import { roleAtLeast, type Role } from "../protocol/roles.js";
import type { Db } from "../store/connection.js";
import type { UserRow } from "../store/schema.js";
import * as usersRepo from "../store/users.repository.js";

/**
 * Who a single sign-on names, and the local user it becomes (README "Single sign-on (OIDC)").
 * The provider's groups decide the role at every sign-in; a person is linked to one local user
 * by the provider's issuer and subject, never by a username.
 */

/** A failed single sign-on: 401 `SSO_FAILED` with `details.reason`, no session opened. */
export function ssoFailure(reason: SsoFailureReason, message: string): AppError {
  return new AppError("SSO_FAILED", message, { reason });
}

/** The groups a claim value lists: an array of strings, or one string; anything else lists none. */
export function groupsOf(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.filter((g): g is string => typeof g === "string");
  return [];
}

/**
 * The role a person acts with: the highest role any of their groups maps to; with none, `viewer`
 * when unknown users are created, else undefined (refused).
 */
export function roleForGroups(settings: Pick<OidcSettings, "roleMap" | "unknownUsers">, groups: readonly string[]): Role | undefined {
  let best: Role | undefined;
  for (const group of groups) {
    const role = settings.roleMap.get(group);
    if (role !== undefined && (best === undefined || roleAtLeast(role, best))) best = role;
  }
  return best ?? (settings.unknownUsers === "create" ? "viewer" : undefined);
}

/**
 * The local username for a person signing in for the first time: the `preferred_username`
 * claim, else `email`, else a name derived from the subject; characters a username may not hold
 * become `-`, and it is cut to 64 characters.
 */
export function usernameFor(claims: Record<string, unknown>, subject: string): string {
  for (const key of ["preferred_username", "email"]) {
    const value = claims[key];
    if (typeof value !== "string") continue;
    const name = value.replace(/[^A-Za-z0-9._@-]/g, "-").slice(0, 64);
    if (/[A-Za-z0-9]/.test(name)) return name;
  }
  return `sso-${createHash("sha256").update(subject).digest("hex").slice(0, 12)}`;
}

/** What {@link signInUser} needs of the provider's answer. */
export interface SsoIdentity {
  issuer: string;
  subject: string;
  /** The username a new local user gets ({@link usernameFor}). */
  username: string;
  role: Role;
}

/**
 * The local user of a single sign-on, inside the caller's transaction: the user linked to the
 * issuer and subject, whose role becomes `identity.role`; else a new user without a password,
 * linked to them. A local user of the same name is never taken over.
 * @throws AppError SSO_FAILED with reason `user_disabled`, `last_owner` (the role would demote the
 *   last enabled owner) or `username_taken`
 */
export async function signInUser(trx: Db, identity: SsoIdentity, now: number): Promise<UserRow> {
  const linked = await usersRepo.findUserByOidc(trx, identity.issuer, identity.subject);
  if (linked !== undefined) {
    if (linked.disabled === 1) throw ssoFailure("user_disabled", `${linked.username} is disabled`);
    if (linked.role === identity.role) return linked;
    if (linked.role === "owner" && (await usersRepo.countEnabledOwners(trx)) <= 1) {
      throw ssoFailure("last_owner", `${linked.username} is the last enabled owner; their groups now give ${identity.role}`);
    }
    await usersRepo.updateUser(trx, linked.user_id, { role: identity.role }, now);
    return { ...linked, role: identity.role, updated_at: now };
  }
  if ((await usersRepo.findUserByName(trx, identity.username)) !== undefined) {
    throw ssoFailure("username_taken", `a local user named ${identity.username} exists already`);
  }
  const row: UserRow = { user_id: newId("usr"), username: identity.username, password_hash: null, role: identity.role, disabled: 0, created_at: now, updated_at: now };
  await usersRepo.insertUser(trx, row);
  await usersRepo.insertOidcLink(trx, { issuer: identity.issuer, subject: identity.subject, user_id: row.user_id, created_at: now });
  return row;
}
