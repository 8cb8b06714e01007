import { ApiError, errorMessage } from "../api/client.js";

/** A form's labels by the wire field they fill (`{ name: "Node name", public_address: "Public address" }`). */
export type FieldLabels = Readonly<Record<string, string>>;

/**
 * The wire field an API error is about, or undefined: the first issue of a schema refusal
 * (`details.issues[0].path`, e.g. `/name`), or the service's `details.field`, or the one field
 * a service refusal names in its details (`{ network_cidr }`), when the form has that field.
 */
export function errorField(err: unknown, labels: FieldLabels): string | undefined {
  if (!(err instanceof ApiError) || typeof err.details !== "object" || err.details === null) return undefined;
  const details = err.details as { issues?: Array<{ path?: unknown }>; field?: unknown };
  const path = details.issues?.[0]?.path;
  const named = typeof path === "string" ? path.split("/")[1] : typeof details.field === "string" ? details.field : Object.keys(details).find((k) => k in labels);
  return named !== undefined && named in labels ? named : undefined;
}

/**
 * What to tell the person who filled the form: the field's label, then what is wrong with it, in
 * place of the wire's `body.name: must be at most 64 characters` (`Node name: must be at most 64
 * characters`); a message that starts with the wire field's name (`network_cidr "…" is invalid`)
 * has the label in its place; anything else, as the service said it, with a capital first letter.
 */
export function humanError(err: unknown, labels: FieldLabels): string {
  const field = errorField(err, labels);
  const label = field === undefined ? undefined : labels[field];
  if (!(err instanceof ApiError) || field === undefined || label === undefined) return capitalised(errorMessage(err));
  const issue = (err.details as { issues?: Array<{ message?: unknown }> }).issues?.[0];
  if (typeof issue?.message === "string") return `${label}: ${issue.message}`;
  if (err.message.startsWith(`${field} `)) return `${label}${err.message.slice(field.length)}`;
  return `${label}: ${err.message}`;
}

function capitalised(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/**
 * A form's error line (`role="alert"`, id `id`, which the field in error names in its
 * `aria-describedby`); nothing when `error` is null or undefined. Without `labels`, the
 * service's message with a capital first letter.
 */
export function FormError({ error, labels = {}, id }: { error: unknown; labels?: FieldLabels; id?: string }) {
  if (error === null || error === undefined) return null;
  return (
    <p className="form-error" role="alert" id={id}>
      {humanError(error, labels)}
    </p>
  );
}

/**
 * The props that mark the input of `field` as the one in error (`aria-invalid`, described by the
 * error line `errorId`), or none.
 */
export function invalidProps(error: unknown, labels: FieldLabels, field: string, errorId: string): { "aria-invalid"?: true; "aria-describedby"?: string } {
  return error !== null && error !== undefined && errorField(error, labels) === field ? { "aria-invalid": true, "aria-describedby": errorId } : {};
}
