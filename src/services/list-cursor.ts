import type { z } from "zod";
import { AppError } from "../errors.js";

/**
 * The opaque cursors of the keyset-paginated lists (docs/history/decisions-2026.md
 * "lists for big fleets"): base64url of the JSON of a position shape of
 * src/protocol/rest.schema.ts (`nodeCursorSchema`, …). The position is the sort key of the last
 * row of the page given, so a cursor stays meaningful while rows are inserted or deleted.
 */

/** Encodes a position as a cursor string (base64url, no padding). */
export function encodeCursor<T>(position: T): string {
  return Buffer.from(JSON.stringify(position), "utf8").toString("base64url");
}

/**
 * Decodes and validates a cursor against its list's position schema.
 * @returns undefined for an absent cursor (the first page)
 * @throws AppError INVALID_CURSOR (400) when the cursor is not base64url JSON of that shape
 *   (also when it belongs to another list, or, with `expect`, to another config or node)
 */
export function decodeCursor<S extends z.ZodType>(
  schema: S,
  raw: string | undefined,
  expect?: (position: z.output<S>) => boolean,
): z.output<S> | undefined {
  if (raw === undefined) return undefined;
  let json: unknown;
  try {
    if (!/^[A-Za-z0-9_-]+$/.test(raw)) throw new Error("not base64url");
    json = JSON.parse(Buffer.from(raw, "base64url").toString("utf8"));
  } catch {
    throw new AppError("INVALID_CURSOR", "the cursor is not one this server issued; start again without a cursor");
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success || (expect !== undefined && !expect(parsed.data))) {
    throw new AppError("INVALID_CURSOR", "the cursor belongs to another list; start again without a cursor");
  }
  return parsed.data;
}
