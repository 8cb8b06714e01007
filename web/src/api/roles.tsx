/**
 * What the signed-in role may do, from one source: each operation's least role is its
 * `x-min-role` (declared with the route, copied into `endpoints.ts` and checked against the
 * OpenAPI document by `test/web/api-client.test.ts`). A page asks `useCan(operationId)` before it
 * offers a control, and `useGate` marks the control in the DOM (`data-op`) and disables it with
 * the reason ("Needs the admin role — you are a viewer"), so a person sees why, and a browser
 * test can find every control of an operation the role may not call (README "Users, roles and
 * tokens").
 */
import { useQuery } from "@tanstack/react-query";
import { useId, type ReactNode } from "react";
import { roleAtLeast, type Role } from "../../../src/protocol/roles.js";
import { useAuth } from "./auth.js";
import { api } from "./client.js";
import { ENDPOINTS, type OperationId } from "./endpoints.js";
import { keys } from "./keys.js";

/**
 * Who is signed in (`GET /api/v1/auth/me`), under the session's token: a new sign-in reads it
 * afresh. Read again after a minute, and at once after a refusal (`app.tsx`), so a role an owner
 * changed shows without a reload.
 */
export function useMe() {
  const { token } = useAuth();
  return useQuery({ queryKey: [...keys.me, token], queryFn: ({ signal }) => api.getMe({ signal }), staleTime: 60_000 });
}

/** Whether the signed-in role may call one operation, and if not, why. */
export interface Can {
  op: OperationId;
  /** True once "who am I" answered with a role at least the operation's. */
  allowed: boolean;
  /** The operation's least role (null: public). */
  minRole: Role | null;
  /** The signed-in role; null until "who am I" answered. */
  role: Role | null;
  /** "Needs the admin role — you are a viewer" when refused; null when allowed or not yet known. */
  reason: string | null;
}

/** "a viewer", "an operator", "an admin", "an owner". */
export function withArticle(role: Role): string {
  return `${/^[aeiou]/.test(role) ? "an" : "a"} ${role}`;
}

/** The reason a role below `minRole` gets: "Needs the admin role — you are a viewer". */
export function refusalReason(minRole: Role, role: Role): string {
  return `Needs the ${minRole} role — you are ${withArticle(role)}`;
}

/** Whether the signed-in role may call `op` (false while "who am I" is still loading, with no reason). */
export function useCan(op: OperationId): Can {
  const role = useMe().data?.user.role ?? null;
  const minRole = ENDPOINTS[op].minRole;
  if (minRole === null) return { op, allowed: true, minRole, role, reason: null };
  if (role === null) return { op, allowed: false, minRole, role, reason: null };
  const allowed = roleAtLeast(role, minRole);
  return { op, allowed, minRole, role, reason: allowed ? null : refusalReason(minRole, role) };
}

/** A control gated by {@link useGate}: spread `props` on it, render `reason` after it. */
export interface Gate {
  can: Can;
  /** True when the role may not call the operation (yet): OR it into the control's own `disabled`. */
  disabled: boolean;
  /** `data-op` (the operationId) and, when refused, `aria-describedby` naming the reason and a `title`. */
  props: { "data-op": OperationId; "aria-describedby"?: string; title?: string };
  /** The reason as a visible text the control points to, or null. */
  reason: ReactNode;
}

/**
 * The gate of one control calling `op`: it carries `data-op="<operationId>"` (browser tests look
 * for every such control a role may not use), and when the role is below the operation's it is
 * disabled with the reason in its `title` and in a text beside it (`aria-describedby`), as a
 * control disabled by MQTT being off is.
 */
export function useGate(op: OperationId): Gate {
  const can = useCan(op);
  const id = useId();
  const refused = can.reason !== null;
  return {
    can,
    disabled: !can.allowed,
    props: { "data-op": op, ...(refused ? { "aria-describedby": id, title: can.reason ?? undefined } : {}) },
    reason: refused ? (
      <span id={id} className="role-reason">
        {can.reason}
      </span>
    ) : null,
  };
}

/**
 * The reason a part of a page is not offered to this role (a form, a table's row actions, a
 * secret the role may not read), as one note: "Needs the admin role — you are a viewer: <what>."
 * Nothing while allowed or still loading.
 */
export function RoleNote({ can, what }: { can: Can; what: string }) {
  if (can.reason === null) return null;
  return (
    <p className="role-note" data-role-note={can.op}>
      {can.reason}: {what}.
    </p>
  );
}
