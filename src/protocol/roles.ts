import { z } from "zod";

/**
 * The roles of a person or token, lowest first (README "Users, roles and tokens"). Each role can
 * do everything the roles below it can:
 * - `viewer`: every read and the SSE stream, nothing that reveals a secret (config texts with
 *   private keys, bind commands, download tokens, snapshot exports);
 * - `operator`: + control commands, bind commands, download tokens for node configs and client
 *   artifacts;
 * - `admin`: + every write (configs, nodes, pairs, tags, port forwards, settings, backups);
 * - `owner`: + users, roles and other users' tokens.
 */
export const ROLES = ["viewer", "operator", "admin", "owner"] as const;
export const roleSchema = z.enum(ROLES);
export type Role = z.output<typeof roleSchema>;

/** A role's place in {@link ROLES}: a higher rank includes every lower one. */
export function roleRank(role: Role): number {
  return ROLES.indexOf(role);
}

/** True when `role` may do what `min` may (it is `min` or above it). */
export function roleAtLeast(role: Role, min: Role): boolean {
  return roleRank(role) >= roleRank(min);
}

/**
 * The OpenAPI extension naming a route's minimum role (`"x-min-role": "operator"`), declared in
 * the route's schema next to its path and checked before the handler runs.
 */
export const MIN_ROLE_KEY = "x-min-role";
