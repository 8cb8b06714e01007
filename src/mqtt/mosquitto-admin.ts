import { randomBytes } from "node:crypto";
import mqtt from "mqtt";
import { z } from "zod";
import type { Logger } from "../logger.js";
import { nodeClientId, parseNodeUsername } from "./authz.policy.js";
import { BrokerUnavailableError, type BackendBrokerAccount, type BrokerAdmin, type NodeBrokerAccount, type ReconcileReport } from "./broker-admin.js";
import { DynsecControl, type DynsecControlOptions } from "./mosquitto-control.js";
import {
  addPage,
  BACKEND_ROLE,
  backendAcls,
  clientSchema,
  listPage,
  NOT_FOUND,
  nodeWanted,
  planAccount,
  roleSchema,
  type DynsecClient,
  type DynsecCommand,
  type DynsecResponse,
  type DynsecRole,
} from "./mosquitto-dynsec.js";

export { CONTROL_TOPIC, RESPONSE_TOPIC } from "./mosquitto-control.js";
export { BACKEND_ROLE, backendAcls, nodeAcls, passwordFingerprint, type DynsecAcl } from "./mosquitto-dynsec.js";

/**
 * The `mosquitto` broker adapter (DESIGN §1 "broker adapters"): Mosquitto 2.0 with the dynamic security
 * plugin, administered over `$CONTROL/dynamic-security/v1` (shared/reference/brokers.md).
 *
 * - Its own MQTT connection, authenticated as the dynamic-security admin that
 *   `mosquitto_ctrl dynsec init` created (SVC_MOSQUITTO_ADMIN_USERNAME/_PASSWORD). The backend's
 *   data connection uses a separate, least-privilege user that this adapter creates and keeps in
 *   line; the admin only ever talks to `$CONTROL/...` (docs/history/decisions-2026.md "Mosquitto adapter").
 * - One client per node, `n:{config_id}:{node_id}`, bound to its client id
 *   `svc-{config_id}-{node_id}` (the broker refuses any other id), holding exactly one role of
 *   the same name whose ACLs are the node's literal topics (spec §5 rules 1-2, §6.1:
 *   `nodeGrants`): publish its 6 upstream topics, subscribe its 4 downstream topics. The
 *   plugin's defaults deny every other publish and subscribe.
 * - The backend user holds role {@link BACKEND_ROLE}: subscribe exactly the filters of
 *   `backendSubscriptions` (spec §5 rule 3) and publish downstream topics.
 * - Retained publishes (spec §6.4 rule 5) cannot be refused by an ACL: the broker config sets
 *   `retain_available false` (deploy/mosquitto/mosquitto.conf), which disconnects the publisher.
 * - Each account carries a fingerprint of its password in `textdescription` (a domain-separated
 *   SHA-256, never the password), so a reconciliation leaves an account that is already right
 *   untouched: any `modifyClient` disconnects the live client.
 * - `modifyClient`, `deleteClient` and `disableClient` disconnect the live client (checked
 *   against Mosquitto 2.0.11); a kick is `disableClient` + `enableClient`.
 * - Requests and responses are matched by `correlationData` (the control channel,
 *   mosquitto-control.ts); a response with `error` is a failure (mosquitto_ctrl exits 0 even
 *   then). A request while disconnected, an unanswered request
 *   ({@link MosquittoAdminOptions.requestTimeoutMs}) or a refused command rejects with
 *   {@link BrokerUnavailableError}; the broker sync retries.
 * - Mosquitto 2.0.11 corrupts a client's role list when a role it still holds is deleted: roles
 *   are deleted only after every client holding them.
 * - Deleting an account kicks its connected client but keeps a disconnected client's durable
 *   session (2.0.11): every node account removal ends that session too (`#removeAccounts`).
 *
 * This module manages the accounts; what they must hold and the commands that get them there are
 * planned in mosquitto-dynsec.ts, and sent over the channel of mosquitto-control.ts.
 */

export interface MosquittoAdminOptions extends DynsecControlOptions {
  /**
   * Clients (and roles) per listing page of a reconciliation. Default 1000. One unpaged listing
   * of 100k accounts is a ~135 MB answer that Mosquitto builds in its only thread (no CONNACK
   * meanwhile) and that the backend holds, parsed, all at once (docs/history/decisions-2026.md
   * "the 100k fleet").
   */
  listPageSize?: number;
}

export class MosquittoAdmin implements BrokerAdmin {
  readonly kind = "mosquitto" as const;
  readonly #control: DynsecControl;
  readonly #url: string;
  readonly #ca: MosquittoAdminOptions["ca"];
  readonly #log: Logger;
  readonly #timeoutMs: number;
  readonly #pageSize: number;
  /** client id → username, from listings and puts: a kick names a client id. */
  readonly #usernames = new Map<string, string>();

  private constructor(control: DynsecControl, opts: MosquittoAdminOptions) {
    this.#control = control;
    this.#url = opts.url;
    this.#ca = opts.ca;
    this.#log = opts.log;
    this.#timeoutMs = opts.requestTimeoutMs ?? 10_000;
    this.#pageSize = Math.max(1, opts.listPageSize ?? 1000);
  }

  /** Starts connecting in the background; never waits for the broker. */
  static start(opts: MosquittoAdminOptions): MosquittoAdmin {
    return new MosquittoAdmin(DynsecControl.start(opts), opts);
  }

  /** Whether the admin connection is up and subscribed to the responses. */
  get connected(): boolean {
    return this.#control.connected;
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
    const removals: DynsecCommand[] = [];
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
    const upserts: DynsecCommand[] = [];
    let upserted = 0;
    const add = (plan: DynsecCommand[]) => {
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
   * accounts' clients may have left (spec §4 rule 12; docs/history/decisions-2026.md "a deleted
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
  async #removeAccounts(removals: DynsecCommand[], accounts: Array<{ username: string; clientId: string }>): Promise<void> {
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
    await this.#control.close();
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
      const commands: DynsecCommand[] = [];
      if (moreClients) commands.push({ command: "listClients", verbose: true, count, offset });
      if (moreRoles) commands.push({ command: "listRoles", verbose: true, count, offset });
      for (const res of await this.#control.run(commands)) {
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
    const [c, r] = await this.#control.run([
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
  async #apply(commands: DynsecCommand[], absentOk: string[] = []): Promise<void> {
    if (commands.length === 0) return;
    const responses = await this.#control.run(commands);
    const tolerated = new Set(["deleteClient", "deleteRole", ...absentOk]);
    const failed = responses.filter((r) => r.error !== undefined && !(NOT_FOUND.test(r.error) && tolerated.has(r.command)));
    const [first] = failed;
    if (first !== undefined) {
      this.#log.warn({ failed: failed.length, command: first.command, error: first.error }, "mosquitto refused dynamic-security commands");
      throw new BrokerUnavailableError(`mosquitto refused ${failed.length} command(s); first: ${first.command}: ${first.error}`);
    }
  }
}
