/**
 * What an audit entry says a request changed (README "Audit log"): the names of the fields it
 * sent, and the values of only those fields that are never a secret. An allow-list, not a
 * deny-list: a field added to a body later (a new key, a new credential) is recorded by name
 * until someone decides its value is safe to keep for a year. Passwords, tokens, private keys,
 * passphrases, bind tokens and webhook secrets are never among {@link RECORDED_VALUES}, so their
 * values never reach the table (test/http/audit-secrets.test.ts drives every route with them).
 */

/**
 * Fields whose values are kept: names people choose for things, roles, modes, flags, numbers and
 * enums. Free-text fields that could hold a credential (URLs, addresses, tags) are kept by name only.
 */
export const RECORDED_VALUES: ReadonlySet<string> = new Set([
  "name",
  "username",
  "role",
  "disabled",
  "enabled",
  "mode",
  "tunnel_protocol",
  "apply_mode",
  "action",
  "hub",
  "auto_pair",
  "listen_port",
  "expires_in_days",
  "source",
  "goos",
  "goarch",
]);

/** Longest recorded text value; a longer one is kept by name only. */
const MAX_VALUE_LENGTH = 128;

/** A request body's summary: `{fields, values?}`, or null when it had no JSON object body. */
export function summarizeChanges(body: unknown): Record<string, unknown> | null {
  if (typeof body !== "object" || body === null || Array.isArray(body) || Buffer.isBuffer(body)) return null;
  const fields = Object.keys(body)
    .filter((k) => (body as Record<string, unknown>)[k] !== undefined)
    .sort();
  if (fields.length === 0) return null;
  const values: Record<string, string | number | boolean> = {};
  for (const field of fields) {
    if (!RECORDED_VALUES.has(field)) continue;
    const value = (body as Record<string, unknown>)[field];
    if (typeof value === "boolean" || (typeof value === "number" && Number.isFinite(value))) values[field] = value;
    else if (typeof value === "string" && value.length <= MAX_VALUE_LENGTH) values[field] = value;
  }
  return Object.keys(values).length > 0 ? { fields, values } : { fields };
}
