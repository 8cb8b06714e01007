import { createHash } from "node:crypto";
import { z } from "zod";
import { DOWNSTREAM, TOPIC_ROOT, backendSubscriptions } from "../protocol/topics.js";
import { nodeGrants } from "./authz.policy.js";
import { BrokerUnavailableError, type NodeBrokerAccount } from "./broker-admin.js";

/**
 * Mosquitto's dynamic-security model as the adapter uses it (shared/reference/brokers.md): the
 * shapes of its clients, roles, ACLs and answers, the ACLs each account must hold (spec §5 rules
 * 1-3), and the plans, pure functions of what the broker holds and what it must hold, that list
 * the commands which make the one the other while touching nothing already right.
 */

/** The role of the backend user. */
export const BACKEND_ROLE = "svc-backend";

/** One dynamic-security ACL. */
export interface DynsecAcl {
  acltype: "publishClientSend" | "publishClientReceive" | "subscribeLiteral" | "subscribePattern" | "unsubscribeLiteral" | "unsubscribePattern";
  topic: string;
  priority: number;
  allow: boolean;
}

/** One dynamic-security command (`command` and its fields). */
export type DynsecCommand = { command: string } & Record<string, unknown>;

const aclSchema = z.object({
  acltype: z.string(),
  topic: z.string(),
  priority: z.number().int().default(0),
  allow: z.boolean(),
});
export const clientSchema = z.object({
  username: z.string(),
  clientid: z.string().optional(),
  textdescription: z.string().optional(),
  disabled: z.boolean().optional(),
  roles: z.array(z.object({ rolename: z.string() })).default([]),
  groups: z.array(z.object({ groupname: z.string() })).default([]),
});
export const roleSchema = z.object({ rolename: z.string(), acls: z.array(aclSchema).default([]) });
export type DynsecClient = z.infer<typeof clientSchema>;
export type DynsecRole = z.infer<typeof roleSchema>;

/** One answer of a `$CONTROL` batch, matched to its command by `correlationData`. */
export const responseSchema = z.object({
  command: z.string(),
  error: z.string().optional(),
  correlationData: z.string().optional(),
  data: z.unknown().optional(),
});
export type DynsecResponse = z.infer<typeof responseSchema>;

/** The fingerprint kept in `textdescription`: proves which password the broker holds without revealing it. */
export function passwordFingerprint(password: string): string {
  return `svc-pw:${createHash("sha256").update(`svc-broker-fingerprint:v1:${password}`).digest("hex").slice(0, 32)}`;
}

/** The ACLs of a node's role (spec §5 rules 1-2): literal topics only. */
export function nodeAcls(configId: string, nodeId: string): DynsecAcl[] {
  const g = nodeGrants(configId, nodeId);
  return [
    ...g.publish.map((topic) => ({ acltype: "publishClientSend" as const, topic, priority: 0, allow: true })),
    ...g.subscribe.map((topic) => ({ acltype: "subscribeLiteral" as const, topic, priority: 0, allow: true })),
  ];
}

/** The ACLs of the backend's role (spec §5 rule 3): its exact upstream filters, and downstream publishes. */
export function backendAcls(): DynsecAcl[] {
  return [
    ...backendSubscriptions().map((topic) => ({ acltype: "subscribeLiteral" as const, topic, priority: 0, allow: true })),
    ...Object.values(DOWNSTREAM).map((suffix) => ({
      acltype: "publishClientSend" as const,
      topic: `${TOPIC_ROOT}/+/+/${suffix}`,
      priority: 0,
      allow: true,
    })),
  ];
}

/** An account as the broker must hold it: its client, bound client id, role and the role's ACLs. */
export interface WantedAccount {
  username: string;
  password: string;
  /** Bound client id; undefined: any (the backend). */
  clientId: string | undefined;
  rolename: string;
  acls: DynsecAcl[];
}

const aclKey = (a: { acltype: string; topic: string }) => `${a.acltype}\u0000${a.topic}`;

/** Commands that make `role` hold exactly `acls` (create it when absent). */
function planRole(rolename: string, acls: DynsecAcl[], role: DynsecRole | undefined): DynsecCommand[] {
  if (role === undefined) return [{ command: "createRole", rolename, acls }];
  const out: DynsecCommand[] = [];
  const have = new Map(role.acls.map((a) => [aclKey(a), a]));
  const want = new Map(acls.map((a) => [aclKey(a), a]));
  for (const [k, a] of have) {
    const w = want.get(k);
    if (w === undefined || w.allow !== a.allow || w.priority !== a.priority) {
      out.push({ command: "removeRoleACL", rolename, acltype: a.acltype, topic: a.topic });
    }
  }
  for (const [k, w] of want) {
    const a = have.get(k);
    if (a === undefined || a.allow !== w.allow || a.priority !== w.priority) out.push({ command: "addRoleACL", rolename, ...w });
  }
  return out;
}

/** Commands that make the account exactly `want` (role first: the client refers to it). */
export function planAccount(want: WantedAccount, client: DynsecClient | undefined, role: DynsecRole | undefined): DynsecCommand[] {
  const out = planRole(want.rolename, want.acls, role);
  const textdescription = passwordFingerprint(want.password);
  const roles = [{ rolename: want.rolename }];
  if (client === undefined) {
    out.push({
      command: "createClient",
      username: want.username,
      password: want.password,
      ...(want.clientId === undefined ? {} : { clientid: want.clientId }),
      textdescription,
      roles,
    });
    return out;
  }
  const inSync =
    client.textdescription === textdescription &&
    (client.clientid ?? undefined) === want.clientId &&
    client.roles.length === 1 &&
    client.roles[0]?.rolename === want.rolename &&
    client.groups.length === 0;
  if (!inSync) {
    out.push({
      command: "modifyClient",
      username: want.username,
      password: want.password,
      // "" removes a client id binding the backend user must not have.
      ...(want.clientId !== undefined ? { clientid: want.clientId } : client.clientid !== undefined ? { clientid: "" } : {}),
      textdescription,
      roles,
      groups: [],
    });
  }
  if (client.disabled === true) out.push({ command: "enableClient", username: want.username });
  return out;
}

/** The account of a node: username, password, client id, and a role of the username's name with its topics. */
export function nodeWanted(a: NodeBrokerAccount): WantedAccount {
  return { username: a.username, password: a.password, clientId: a.clientId, rolename: a.username, acls: nodeAcls(a.configId, a.nodeId) };
}

/** The error text of a command on a client or role that does not exist. */
export const NOT_FOUND = /not found/i;

/**
 * Adds a listing page to `into` (by name). True while more pages may follow (a full page).
 * @throws BrokerUnavailableError when the page repeats a name already listed: the broker does not
 *   honour `offset` (paging would never end, or plan from a partial view)
 */
export function addPage<T>(into: Map<string, T>, page: T[], name: (item: T) => string, count: number): boolean {
  for (const item of page) {
    if (into.has(name(item))) throw new BrokerUnavailableError(`mosquitto: a paged listing repeated ${name(item)} (offset not honoured)`);
    into.set(name(item), item);
  }
  return page.length === count;
}

/** The items of one listing answer (`data[key]`). @throws BrokerUnavailableError on an error or another shape */
export function listPage<T>(res: DynsecResponse, key: "clients" | "roles", item: z.ZodType<T>): T[] {
  const parsed = z.object({ [key]: z.array(item) }).safeParse(res.data);
  if (res.error !== undefined || !parsed.success) {
    throw new BrokerUnavailableError(`mosquitto: unexpected ${res.command} answer (${res.error ?? "bad shape"})`);
  }
  return (parsed.data as Record<string, T[]>)[key] ?? [];
}
