import { z } from "zod";

/**
 * Field rules shared by every boundary that accepts mesh data: the REST API (src/http/schemas.ts),
 * snapshot rows (src/services/snapshot-rows.ts) and, for `interface_name`, the MQTT envelopes.
 * One definition each, so a snapshot can never hold what the API would refuse (docs/history/decisions-2026.md "Input rules").
 */

/**
 * Printable text: trimmed, 1..max characters, no C0 control (U+0000-U+001F), DEL (U+007F) or
 * C1 control (U+0080-U+009F: C1 controls such as U+0085 NEL and U+009B CSI act as
 * line breaks and terminal escapes).
 */
export const printable = (max: number) =>
  z
    .string()
    .trim()
    .min(1, "must not be empty")
    .max(max, `must be at most ${max} characters`)
    // eslint-disable-next-line no-control-regex
    .regex(/^[^\u0000-\u001f\u007f-\u009f]*$/, "must not contain control characters");

/** Config and node names (spec §2.2, §2.3): printable, at most 64 characters. */
export const nameSchema = printable(64);
/** spec §2.2 (declared in ./enums.ts). */
export { tunnelProtocolSchema } from "./enums.js";
/**
 * An integer query parameter written in plain decimal (`1`..`max`, no sign, exponent, hex, blanks
 * or leading zeros), as a number. `z.coerce.number()` would take `0x10`, `1e3` and ` 1`
 * (accepted input the OpenAPI document does not describe).
 */
export function queryInt(min: number, max: number) {
  return z
    .string()
    .regex(/^(0|[1-9][0-9]{0,15})$/, "must be a decimal integer")
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));
}

/** A TCP/UDP port, 1..65535. */
export const portSchema = z.number().int().min(1).max(65535);
export const ipv4Schema = z.ipv4();
/**
 * A port forward's DNAT target: an IPv4 address one host can hold, so not in 0.0.0.0/8 ("this
 * network"), 224.0.0.0/4 (multicast) or 255.255.255.255 (broadcast); iptables would accept
 * those and forward into nothing (docs/history/decisions-2026.md "HTTP
 * fuzzing and abuse limits").
 */
export const forwardTargetSchema = ipv4Schema.refine((a) => {
  const first = Number(a.split(".")[0]);
  return first !== 0 && !(first >= 224 && first <= 239) && a !== "255.255.255.255";
}, "must be a host address (not 0.0.0.0/8, multicast or 255.255.255.255)");
/**
 * wg-quick's interface name rule: 1..15 of `[a-zA-Z0-9_=+.-]`, and not `.` or `..` (Linux
 * refuses both as interface names, and the download would be named `...conf`).
 */
export const interfaceNameSchema = z
  .string()
  .regex(/^[a-zA-Z0-9_=+.-]{1,15}$/, "must be 1-15 of [a-zA-Z0-9_=+.-]")
  .refine((s) => s !== "." && s !== "..", "must not be . or ..");
/** A public endpoint: IPv4, IPv6 or DNS host name. */
export const publicAddressSchema = z.union([z.ipv4(), z.ipv6(), z.hostname().max(253)], {
  error: "must be an IPv4 address, an IPv6 address or a host name",
});
/**
 * The public URL hosts are told to reach the service at (spec `{base_url}`): `http://` or
 * `https://`, a host, an optional port and nothing else (a path, query, fragment or user name
 * would be joined wrongly with `/api/...`). A trailing `/` is accepted; the service stores the
 * URL's origin.
 */
export const publicUrlSchema = z
  .string()
  .trim()
  .max(2048)
  .superRefine((value, ctx) => {
    const problem = publicUrlProblem(value);
    if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
  });

/** What is wrong with a public URL, in words an operator can act on; undefined when it is fine. */
export function publicUrlProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return "must be a full URL such as https://mesh.example.com or http://192.0.2.10:8080";
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return "must start with http:// or https://";
  if (url.hostname === "") return "must name a host";
  if (url.username !== "" || url.password !== "") return "must not carry a user name or password";
  if (url.pathname !== "/" || url.search !== "" || url.hash !== "" || /[?#]/.test(value)) {
    return "must be only scheme, host and port, without a path, query or fragment (e.g. https://mesh.example.com:8443)";
  }
  return undefined;
}

export const tagSchema = z.string().regex(/^[a-zA-Z0-9][a-zA-Z0-9_.:-]{0,31}$/, "must be 1-32 of [a-zA-Z0-9_.:-]");
/**
 * A config's IPv4 network, bounded in length here; its syntax and the reserved blocks it must not
 * overlap (loopback, multicast ...) are checked by the service with `parseConfigNetwork`
 * (`src/domain/address-pool.ts`), which answers VALIDATION_FAILED naming the rule.
 */
export const networkCidrSchema = z.string().min(9).max(18);
