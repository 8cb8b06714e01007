import { createHash, randomBytes } from "node:crypto";
import mqtt, { type IClientOptions, type MqttClient } from "mqtt";
import { z } from "zod";
import type { Logger } from "../logger.js";
import { DOWNSTREAM, TOPIC_ROOT, backendSubscriptions } from "../protocol/topics.js";
import { nodeClientId, nodeGrants, parseNodeUsername } from "./authz.policy.js";
import { BrokerUnavailableError, type BackendBrokerAccount, type BrokerAdmin, type NodeBrokerAccount, type ReconcileReport } from "./broker-admin.js";
import { redactUrl } from "./backend-client.js";

/**
 * The `mosquitto` broker adapter (DESIGN §1 "broker adapters"): Mosquitto 2.0 with the dynamic security
 * plugin, administered over `$CONTROL/dynamic-security/v1` (shared/reference/brokers.md).
 *
 * - Its own MQTT connection, authenticated as the dynamic-security admin that
 *   `mosquitto_ctrl dynsec init` created (SVC_MOSQUITTO_ADMIN_USERNAME/_PASSWORD). The backend's
 *   data connection uses a separate, least-privilege user that this adapter creates and keeps in
 *   line; the admin only ever talks to `$CONTROL/...` (docs/decisions.md "Mosquitto adapter").
 * - One client per node, `n:{config_id}:{node_id}`, bound to its client id
 *   `svc-{config_id}-{node_id}` (the broker refuses any other id), holding exactly one role of
 *   the same name whose ACLs are the node's literal topics (spec §5 rules 1-2, §6.1:
 *   {@link nodeGrants}): publish its 6 upstream topics, subscribe its 4 downstream topics. The
 *   plugin's defaults deny every other publish and subscribe.
 * - The backend user holds role {@link BACKEND_ROLE}: subscribe exactly the filters of
 *   {@link backendSubscriptions} (spec §5 rule 3) and publish downstream topics.
 * - Retained publishes (spec §6.4 rule 5) cannot be refused by an ACL: the broker config sets
 *   `retain_available false` (deploy/mosquitto/mosquitto.conf), which disconnects the publisher.
 * - Each account carries a fingerprint of its password in `textdescription` (a domain-separated
 *   SHA-256, never the password), so a reconciliation leaves an account that is already right
 *   untouched: any `modifyClient` disconnects the live client.
 * - `modifyClient`, `deleteClient` and `disableClient` disconnect the live client (checked
 *   against Mosquitto 2.0.11); a kick is `disableClient` + `enableClient`.
 * - Requests and responses are matched by `correlationData`; a response with `error` is a
 *   failure (mosquitto_ctrl exits 0 even then). A request while disconnected, an unanswered
 *   request ({@link MosquittoAdminOptions.requestTimeoutMs}) or a refused command rejects with
 *   {@link BrokerUnavailableError}; the broker sync retries.
 * - Mosquitto 2.0.11 corrupts a client's role list when a role it still holds is deleted: roles
 *   are deleted only after every client holding them.
 * - Deleting an account kicks its connected client but keeps a disconnected client's durable
 *   session (2.0.11): every node account removal ends that session too (`#removeAccounts`).
 */

export const CONTROL_TOPIC = "$CONTROL/dynamic-security/v1";
export const RESPONSE_TOPIC = `${CONTROL_TOPIC}/response`;
/** The role of the backend user. */
export const BACKEND_ROLE = "svc-backend";

export interface MosquittoAdminOptions {
  /** The broker, e.g. mqtt://mosquitto:1883 (`mqtts://` = TLS). */
  url: string;
  /** The dynamic-security admin (not the backend user). */
  username: string;
  /** Never logged. */
  password: string;
  ca?: string | Buffer | string[] | Buffer[];
  log: Logger;
  /** An unanswered batch of commands fails after this long, ms. Default 10 000. */
  requestTimeoutMs?: number;
  /** Commands per `$CONTROL` message. Default 200. */
  batchSize?: number;
  /**
   * Clients (and roles) per listing page of a reconciliation. Default 1000. One unpaged listing
   * of 100k accounts is a ~135 MB answer that Mosquitto builds in its only thread (no CONNACK
   * meanwhile) and that the backend holds, parsed, all at once (docs/decisions.md "Issue 14:
   * the 100k fleet").
   */
  listPageSize?: number;
  /** Reconnect backoff of the admin connection, ms (doubling from min to max). */
  reconnectMinMs?: number;
  reconnectMaxMs?: number;
  /** The admin connection is (re)established and subscribed: the broker may have restarted, reconcile. */
  onConnect?(): void;
}

/** One dynamic-security ACL. */
export interface DynsecAcl {
  acltype: "publishClientSend" | "publishClientReceive" | "subscribeLiteral" | "subscribePattern" | "unsubscribeLiteral" | "unsubscribePattern";
  topic: string;
  priority: number;
  allow: boolean;
}

type Command = { command: string } & Record<string, unknown>;

const aclSchema = z.object({
  acltype: z.string(),
  topic: z.string(),
  priority: z.number().int().default(0),
  allow: z.boolean(),
});
const clientSchema = z.object({
  username: z.string(),
  clientid: z.string().optional(),
  textdescription: z.string().optional(),
  disabled: z.boolean().optional(),
  roles: z.array(z.object({ rolename: z.string() })).default([]),
  groups: z.array(z.object({ groupname: z.string() })).default([]),
});
const roleSchema = z.object({ rolename: z.string(), acls: z.array(aclSchema).default([]) });
type DynsecClient = z.infer<typeof clientSchema>;
type DynsecRole = z.infer<typeof roleSchema>;

const responseSchema = z.object({
  command: z.string(),
  error: z.string().optional(),
  correlationData: z.string().optional(),
  data: z.unknown().optional(),
});
const responsesSchema = z.object({ responses: z.array(responseSchema) });
type DynsecResponse = z.infer<typeof responseSchema>;

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

interface WantedAccount {
  username: string;
  password: string;
  /** Bound client id; undefined: any (the backend). */
  clientId: string | undefined;
  rolename: string;
  acls: DynsecAcl[];
}

const aclKey = (a: { acltype: string; topic: string }) => `${a.acltype}\u0000${a.topic}`;

/** Commands that make `role` hold exactly `acls` (create it when absent). */
function planRole(rolename: string, acls: DynsecAcl[], role: DynsecRole | undefined): Command[] {
  if (role === undefined) return [{ command: "createRole", rolename, acls }];
  const out: Command[] = [];
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
function planAccount(want: WantedAccount, client: DynsecClient | undefined, role: DynsecRole | undefined): Command[] {
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

function nodeWanted(a: NodeBrokerAccount): WantedAccount {
  return { username: a.username, password: a.password, clientId: a.clientId, rolename: a.username, acls: nodeAcls(a.configId, a.nodeId) };
}

const NOT_FOUND = /not found/i;

/**
 * Adds a listing page to `into` (by name). True while more pages may follow (a full page).
 * @throws BrokerUnavailableError when the page repeats a name already listed: the broker does not
 *   honour `offset` (paging would never end, or plan from a partial view)
 */
function addPage<T>(into: Map<string, T>, page: T[], name: (item: T) => string, count: number): boolean {
  for (const item of page) {
    if (into.has(name(item))) throw new BrokerUnavailableError(`mosquitto: a paged listing repeated ${name(item)} (offset not honoured)`);
    into.set(name(item), item);
  }
  return page.length === count;
}

/** The items of one listing answer (`data[key]`). @throws BrokerUnavailableError on an error or another shape */
function listPage<T>(res: DynsecResponse, key: "clients" | "roles", item: z.ZodType<T>): T[] {
  const parsed = z.object({ [key]: z.array(item) }).safeParse(res.data);
  if (res.error !== undefined || !parsed.success) {
    throw new BrokerUnavailableError(`mosquitto: unexpected ${res.command} answer (${res.error ?? "bad shape"})`);
  }
  return (parsed.data as Record<string, T[]>)[key] ?? [];
}

export class MosquittoAdmin implements BrokerAdmin {
  readonly kind = "mosquitto" as const;
  readonly #client: MqttClient;
  readonly #url: string;
  readonly #ca: MosquittoAdminOptions["ca"];
  readonly #log: Logger;
  readonly #timeoutMs: number;
  readonly #batchSize: number;
  readonly #pageSize: number;
  readonly #prefix = randomBytes(4).toString("hex");
  #seq = 0;
  #ready = false;
  #closed = false;
  readonly #pending = new Map<string, { resolve: (r: DynsecResponse) => void; reject: (e: Error) => void }>();
  /** client id → username, from listings and puts: a kick names a client id. */
  readonly #usernames = new Map<string, string>();

  private constructor(client: MqttClient, opts: MosquittoAdminOptions) {
    this.#client = client;
    this.#url = opts.url;
    this.#ca = opts.ca;
    this.#log = opts.log;
    this.#timeoutMs = opts.requestTimeoutMs ?? 10_000;
    this.#batchSize = opts.batchSize ?? 200;
    this.#pageSize = Math.max(1, opts.listPageSize ?? 1000);
  }

  /** Starts connecting in the background; never waits for the broker. */
  static start(opts: MosquittoAdminOptions): MosquittoAdmin {
    const minMs = opts.reconnectMinMs ?? 1000;
    const maxMs = Math.max(opts.reconnectMaxMs ?? 30_000, minMs);
    const options: IClientOptions = {
      protocolVersion: 4,
      clientId: `svc-dynsec-admin-${randomBytes(6).toString("hex")}`,
      username: opts.username,
      password: opts.password,
      clean: true,
      reconnectPeriod: minMs,
      connectTimeout: 10_000,
      reconnectOnConnackError: true,
      resubscribe: false,
      ...(opts.ca === undefined ? {} : { ca: opts.ca }),
    };
    const client = mqtt.connect(opts.url, options);
    const self = new MosquittoAdmin(client, opts);
    let lastProblem = "";
    client.on("connect", () => {
      client.options.reconnectPeriod = minMs;
      lastProblem = "";
      client.subscribe(RESPONSE_TOPIC, { qos: 1 }, (err, _g, suback) => {
        const refused = ((suback?.granted ?? []) as number[]).some((c) => c >= 128);
        if (err || refused) {
          opts.log.error({ err: err?.message }, "mosquitto admin: subscription to the dynamic-security responses refused");
          return;
        }
        self.#ready = true;
        opts.log.info({ url: redactUrl(opts.url) }, "mosquitto admin connected");
        opts.onConnect?.();
      });
    });
    client.on("close", () => {
      self.#ready = false;
      self.#failPending("the admin connection to mosquitto closed");
      client.options.reconnectPeriod = Math.min((client.options.reconnectPeriod ?? minMs) * 2, maxMs);
    });
    client.on("error", (err: Error & { code?: unknown }) => {
      if (self.#closed || err.message === lastProblem) return;
      lastProblem = err.message;
      opts.log.warn({ url: redactUrl(opts.url), err: err.message, code: err.code }, "mosquitto admin connection failed; retrying with backoff");
    });
    client.on("message", (topic, payload) => {
      if (topic === RESPONSE_TOPIC) self.#onResponse(payload);
    });
    return self;
  }

  /** Whether the admin connection is up and subscribed to the responses. */
  get connected(): boolean {
    return this.#ready;
  }

  async putNode(account: NodeBrokerAccount): Promise<void> {
    const [client, role] = await this.#fetch(account.username, account.username);
    this.#usernames.set(account.clientId, account.username);
    await this.#apply(planAccount(nodeWanted(account), client, role));
  }

  async removeNode(username: string, clientId: string): Promise<void> {
    this.#usernames.delete(clientId);
    // The client first: deleting a role a client still holds corrupts 2.0.11's role list.
    await this.#removeAccounts(
      [
        { command: "deleteClient", username },
        { command: "deleteRole", rolename: username },
      ],
      [{ username, clientId }],
    );
  }

  async kick(clientId: string): Promise<void> {
    let username = this.#usernames.get(clientId);
    if (username === undefined) {
      const { clients } = await this.#list();
      username = clients.find((c) => c.clientid === clientId)?.username;
    }
    if (username === undefined) return;
    // Absent is fine: "Client not found" on either is no failure.
    await this.#apply(
      [
        { command: "disableClient", username },
        { command: "enableClient", username },
      ],
      ["disableClient", "enableClient"],
    );
  }

  async reconcile(desired: { backend: BackendBrokerAccount; nodes: NodeBrokerAccount[]; keep?: string[] }): Promise<ReconcileReport> {
    const { clients, roles } = await this.#list();
    const clientBy = new Map(clients.map((c) => [c.username, c]));
    const roleBy = new Map(roles.map((r) => [r.rolename, r]));
    const wanted = new Set([...desired.nodes.map((n) => n.username), ...(desired.keep ?? [])]);

    // 1. Node-shaped clients the store does not have (deleting disconnects them), then their roles
    //    once no remaining client holds them.
    const removals: Command[] = [];
    const removedClients = new Set<string>();
    const removedAccounts: Array<{ username: string; clientId: string }> = [];
    for (const c of clients) {
      const ids = parseNodeUsername(c.username);
      if (ids !== null && !wanted.has(c.username)) {
        removals.push({ command: "deleteClient", username: c.username });
        removedClients.add(c.username);
        removedAccounts.push({ username: c.username, clientId: c.clientid ?? nodeClientId(ids.configId, ids.nodeId) });
      }
    }
    const held = new Set(clients.filter((c) => !removedClients.has(c.username)).flatMap((c) => c.roles.map((r) => r.rolename)));
    for (const r of roles) {
      if (parseNodeUsername(r.rolename) !== null && !wanted.has(r.rolename) && !held.has(r.rolename)) {
        removals.push({ command: "deleteRole", rolename: r.rolename });
      }
    }
    await this.#removeAccounts(removals, removedAccounts);

    // 2. The backend user and every node account, touching only what differs.
    const upserts: Command[] = [];
    let upserted = 0;
    const add = (plan: Command[]) => {
      if (plan.length > 0) upserted += 1;
      upserts.push(...plan);
    };
    const backend = desired.backend;
    add(
      planAccount(
        { username: backend.username, password: backend.password, clientId: undefined, rolename: BACKEND_ROLE, acls: backendAcls() },
        clientBy.get(backend.username),
        roleBy.get(BACKEND_ROLE),
      ),
    );
    this.#usernames.clear();
    for (const node of desired.nodes) {
      this.#usernames.set(node.clientId, node.username);
      add(planAccount(nodeWanted(node), clientBy.get(node.username), roleBy.get(node.username)));
    }
    await this.#apply(upserts);
    // Mosquitto has no authorization cache: ACL changes apply to the next packet.
    return { upserted, removed: removedClients.size };
  }

  /**
   * Runs `removals` (which delete the node `accounts`) and ends the durable sessions those
   * accounts' clients may have left (spec §4 rule 12; docs/decisions.md "Issue 15: a deleted
   * Mosquitto account's durable session"). Mosquitto 2.0.11's `deleteClient` kicks connected
   * clients only: a disconnected client's session (its subscriptions and queued messages) stays,
   * and whoever next connects with that client id and clean start 0 resumes it, so after a reset
   * and rebind the new agent got what was queued for the revoked one and what was published to
   * its topics before it connected. No dynamic-security command deletes a session: in the same
   * batch as the removals each account is created again, with a random password, no role and its
   * client id; a clean-start connection as it (no session expiry) makes Mosquitto discard the old
   * session; then the account is deleted. An account whose connection failed stays, so the next
   * reconciliation removes it and tries again.
   * @throws BrokerUnavailableError
   */
  async #removeAccounts(removals: Command[], accounts: Array<{ username: string; clientId: string }>): Promise<void> {
    const password = randomBytes(32).toString("base64url");
    await this.#apply([...removals, ...accounts.map((a) => ({ command: "createClient", username: a.username, password, clientid: a.clientId, textdescription: "svc-session-end" }))]);
    const ended: string[] = [];
    let failure: unknown;
    for (const a of accounts) {
      try {
        await this.#connectClean(a.username, password, a.clientId);
        ended.push(a.username);
      } catch (err) {
        failure ??= err;
      }
    }
    await this.#apply(ended.map((username) => ({ command: "deleteClient", username })));
    if (failure !== undefined) {
      throw new BrokerUnavailableError(`mosquitto: ${accounts.length - ended.length} durable session(s) not ended; the next reconciliation retries`, { cause: failure });
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#ready = false;
    this.#failPending("the mosquitto admin is closing");
    await this.#client.endAsync(true);
  }

  /**
   * Every client and role, in pages of {@link MosquittoAdminOptions.listPageSize} (`count` and
   * `offset` of `listClients`/`listRoles`): one page of each per `$CONTROL` message until a page
   * comes back short. Only this adapter writes accounts, and never during a listing (the broker
   * sync runs one operation at a time), so the pages do not shift under it.
   * @throws BrokerUnavailableError on an error answer or an unexpected shape
   */
  async #list(): Promise<{ clients: DynsecClient[]; roles: DynsecRole[] }> {
    const clients = new Map<string, DynsecClient>();
    const roles = new Map<string, DynsecRole>();
    const count = this.#pageSize;
    let moreClients = true;
    let moreRoles = true;
    for (let offset = 0; moreClients || moreRoles; offset += count) {
      const commands: Command[] = [];
      if (moreClients) commands.push({ command: "listClients", verbose: true, count, offset });
      if (moreRoles) commands.push({ command: "listRoles", verbose: true, count, offset });
      for (const res of await this.#run(commands)) {
        if (res.command === "listClients") moreClients = addPage(clients, listPage(res, "clients", clientSchema), (c) => c.username, count);
        else moreRoles = addPage(roles, listPage(res, "roles", roleSchema), (r) => r.rolename, count);
      }
    }
    return { clients: [...clients.values()], roles: [...roles.values()] };
  }

  /** Connects once with clean start (no session expiry) and disconnects. @throws BrokerUnavailableError when refused or unanswered */
  async #connectClean(username: string, password: string, clientId: string): Promise<void> {
    const client = mqtt.connect(this.#url, {
      protocolVersion: 4,
      clientId,
      username,
      password,
      clean: true,
      reconnectPeriod: 0,
      connectTimeout: this.#timeoutMs,
      ...(this.#ca === undefined ? {} : { ca: this.#ca }),
    });
    try {
      await new Promise<void>((resolve, reject) => {
        client.once("connect", () => resolve());
        client.once("error", (err) => reject(new BrokerUnavailableError(`mosquitto refused the session-ending connection: ${err.message}`, { cause: err })));
        client.once("close", () => reject(new BrokerUnavailableError("mosquitto closed the session-ending connection before CONNACK")));
      });
    } catch (err) {
      client.end(true);
      throw err;
    }
    await client.endAsync();
  }

  /** The current client and role, undefined where absent. */
  async #fetch(username: string, rolename: string): Promise<[DynsecClient | undefined, DynsecRole | undefined]> {
    const [c, r] = await this.#run([
      { command: "getClient", username },
      { command: "getRole", rolename },
    ]);
    const get = <T>(res: DynsecResponse | undefined, key: string, schema: z.ZodType<T>): T | undefined => {
      if (res?.error !== undefined) {
        if (NOT_FOUND.test(res.error)) return undefined;
        throw new BrokerUnavailableError(`mosquitto refused ${res.command}: ${res.error}`);
      }
      const parsed = z.object({ [key]: schema }).safeParse(res?.data);
      if (!parsed.success) throw new BrokerUnavailableError(`mosquitto: unexpected ${res?.command ?? "answer"} shape`);
      return (parsed.data as Record<string, T>)[key];
    };
    return [get(c, "client", clientSchema), get(r, "role", roleSchema)];
  }

  /** Runs commands; any error but "not found" on a delete (or on `absentOk` commands) is a failure. */
  async #apply(commands: Command[], absentOk: string[] = []): Promise<void> {
    if (commands.length === 0) return;
    const responses = await this.#run(commands);
    const tolerated = new Set(["deleteClient", "deleteRole", ...absentOk]);
    const failed = responses.filter((r) => r.error !== undefined && !(NOT_FOUND.test(r.error) && tolerated.has(r.command)));
    const [first] = failed;
    if (first !== undefined) {
      this.#log.warn({ failed: failed.length, command: first.command, error: first.error }, "mosquitto refused dynamic-security commands");
      throw new BrokerUnavailableError(`mosquitto refused ${failed.length} command(s); first: ${first.command}: ${first.error}`);
    }
  }

  /** Sends commands in batches, one batch at a time, and answers their responses in order. */
  async #run(commands: Command[]): Promise<DynsecResponse[]> {
    const out: DynsecResponse[] = [];
    for (let i = 0; i < commands.length; i += this.#batchSize) {
      out.push(...(await this.#batch(commands.slice(i, i + this.#batchSize))));
    }
    return out;
  }

  #batch(commands: Command[]): Promise<DynsecResponse[]> {
    if (!this.#ready) return Promise.reject(new BrokerUnavailableError("not connected to mosquitto"));
    const ids = commands.map(() => `${this.#prefix}-${++this.#seq}`);
    const answers = ids.map(
      (id) => new Promise<DynsecResponse>((resolve, reject) => this.#pending.set(id, { resolve, reject })),
    );
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new BrokerUnavailableError(`mosquitto did not answer within ${this.#timeoutMs} ms`)), this.#timeoutMs);
    });
    const payload = JSON.stringify({ commands: commands.map((c, i) => ({ ...c, correlationData: ids[i] })) });
    this.#client.publish(CONTROL_TOPIC, payload, { qos: 1 }, (err) => {
      if (err) for (const id of ids) this.#pending.get(id)?.reject(new BrokerUnavailableError("publish to $CONTROL failed", { cause: err }));
    });
    return Promise.race([Promise.all(answers), timeout]).finally(() => {
      clearTimeout(timer);
      for (const id of ids) this.#pending.delete(id);
    });
  }

  #onResponse(payload: Buffer): void {
    let parsed;
    try {
      parsed = responsesSchema.safeParse(JSON.parse(payload.toString("utf8")));
    } catch {
      parsed = undefined;
    }
    if (!parsed?.success) {
      this.#log.warn("mosquitto admin: unparsable dynamic-security response ignored");
      return;
    }
    for (const r of parsed.data.responses) {
      if (r.correlationData === undefined) continue;
      const p = this.#pending.get(r.correlationData);
      if (p === undefined) continue; // another admin's, or one that timed out
      this.#pending.delete(r.correlationData);
      p.resolve(r);
    }
  }

  #failPending(reason: string): void {
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const p of pending) p.reject(new BrokerUnavailableError(reason));
  }
}
