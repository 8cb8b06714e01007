import { randomBytes } from "node:crypto";
import { backgroundTurn as nextTurn } from "../lib/background-turn.js";
import PQueue from "p-queue";
import type { z } from "zod";
import { isoTime, type Clock } from "../lib/clock.js";
import { controlLogView, type CommandToSend, type CommandTracker, type ControlLogView, type OpenCommand } from "../actors/commands.js";
import type { NodeProjection } from "../actors/projection.js";
import type { NodeActorRegistry } from "../actors/registry.js";
import { hashToken, mintToken } from "../domain/tokens.js";
import { AppError } from "../errors.js";
import { nodeClientId, nodeUsername } from "../mqtt/authz.policy.js";
import type { NodeBrokerAccount } from "../mqtt/broker-admin.js";
import type { ControlAction, TunnelProtocol } from "../protocol/envelope.schema.js";
import { nodeTopics } from "../protocol/topics.js";
import type { endpointStatusViewSchema } from "../protocol/views.schema.js";
import type { Logger } from "../logger.js";
import { claimBindToken, findBindToken, insertBindToken, invalidateBindTokensOf } from "../store/bind-tokens.repository.js";
import { deleteBrokerCredential, deleteBrokerCredentialsOfNode, putBrokerCredential } from "../store/broker-credentials.repository.js";
import { getConfigApplyMode, getConfigTunnelProtocol } from "../store/configs.repository.js";
import { listControlLogs } from "../store/control-logs.repository.js";
import type { Db, Store } from "../store/db.js";
import { clearClientState, recordClientBound } from "../store/node-client-state.repository.js";
import { getNodeById } from "../store/nodes.repository.js";
import { materializeStaged } from "./rendering.service.js";
import type { NodeRow } from "../store/schema.js";
import { listControlLogPage } from "./lists.js";
import { requireNode } from "./node-lookup.js";
import { clientView } from "./views.js";

/** The `endpoint.status.updated` payload and the endpoint-status answer (DESIGN §5). */
export type EndpointStatusView = z.output<typeof endpointStatusViewSchema>;

/** The bind answer (spec §2.6, DESIGN §5). */
export interface BindProfile {
  profile: { config_id: string; node_id: string; server_url: string };
  /** `ca_cert`: PEM of the CA the agent trusts; present only when `tls` is true (spec §2.6). */
  mqtt: { host: string; port: number; tls: boolean; username: string; password: string; client_id: string; ca_cert?: string };
  topics: ReturnType<typeof nodeTopics>;
}

/**
 * What bind profiles tell agents about the broker (spec §2.6): host, port, whether to use TLS
 * and, with TLS, the CA PEM to trust (undefined: the agent's system trust store).
 */
export interface BrokerEndpoint {
  host: string;
  port: number;
  tls: boolean;
  caCert?: string;
}

export interface ControlServiceDeps {
  store: Store;
  clock: Clock;
  log: Logger;
  registry: NodeActorRegistry;
  commands: CommandTracker;
  mqttEnabled: boolean;
  /** `{base_url}` now (src/services/public-url.service.ts): bind commands and profiles name it. */
  publicUrl: () => string;
  bindTokenTtlMs: number;
  configPushDebounceMs: number;
  /** Host and port bind profiles give agents. */
  brokerEndpoint(): BrokerEndpoint;
  /**
   * The bound node's password sealed for external brokers (src/mqtt/broker-passwords.ts),
   * stored in the bind transaction; null when it cannot be sealed (logged by the caller).
   */
  sealBrokerPassword(username: string, password: string): string | null;
  /**
   * After the bind committed: creates or rotates the node's broker account and disconnects a
   * client still using old credentials (src/mqtt/broker-sync.ts). Never rejects: with the broker
   * down the account is reconciled later (spec §4 rule 11).
   */
  brokerAccountBound(account: NodeBrokerAccount): Promise<void>;
  /**
   * The app events (src/services/app-events.ts) control reacts to: a node machine's
   * `node.config_push_requested` schedules an automatic push. Typed by that one event, not the
   * whole map, because the map's payloads import the mesh service, which imports this module.
   */
  events: { on(event: "node.config_push_requested", listener: (configId: string, nodeId: string) => void): unknown };
}

/** Automatic config pushes running at once at most (see `ControlService#autoPushes`). */
export const AUTO_PUSH_CONCURRENCY = 6;

/**
 * The MQTT write APIs (spec §4 rules 10–12, 14; DESIGN §5 control): bind-command, bind, reset,
 * control and config push, plus the endpoint status read. Every write API answers
 * `MQTT_DISABLED` while `SVC_ENABLE_MQTT_SERVICES=false` (spec §1.7).
 */
export class ControlService {
  readonly #d: ControlServiceDeps;
  readonly #pushTimers = new Map<string, unknown>();
  /**
   * Automatic pushes whose debounce ran out. A re-stage of 1,000 nodes makes their timers run out
   * in batches of ~50 in one timers phase; each push reads its node and text, logs a row and
   * sends an SSE frame, so at most {@link AUTO_PUSH_CONCURRENCY} run at once, each starting on
   * its background turn (src/lib/background-turn.ts: one background step per loop iteration:
   * ingest is not held back for their batch).
   */
  readonly #autoPushes = new PQueue({ concurrency: AUTO_PUSH_CONCURRENCY });

  constructor(deps: ControlServiceDeps) {
    this.#d = deps;
    deps.events.on("node.config_push_requested", (configId, nodeId) => this.schedulePush(configId, nodeId));
  }

  /**
   * spec §4 rule 10: validates that the node is dynamic and issues a one-time bind token valid
   * for 5 minutes; any earlier valid token of the node is invalidated (spec §3.6).
   * @throws AppError MQTT_DISABLED, NOT_FOUND, NODE_NOT_DYNAMIC
   */
  async bindCommand(configId: string, nodeId: string): Promise<{ command: string; expires_at: string }> {
    this.#requireMqtt();
    const now = this.#d.clock.now();
    const { token, hash } = mintToken();
    const expiresAt = now + this.#d.bindTokenTtlMs;
    await this.#d.store.transaction(async (trx) => {
      const node = await requireNode(trx, configId, nodeId);
      if (node.mode !== "dynamic") throw new AppError("NODE_NOT_DYNAMIC", "bind commands are for dynamic nodes");
      await invalidateBindTokensOf(trx, nodeId);
      await insertBindToken(trx, { token_hash: hash, node_id: nodeId, created_at: now, expires_at: expiresAt });
    });
    await this.#d.registry.send(configId, nodeId, { type: "bind_token.issued", at: now, expiresAt });
    return { command: `svcctl bind --server ${this.#d.publicUrl()} --token ${token}`, expires_at: isoTime(expiresAt) };
  }

  /**
   * spec §4 rule 11: redeems a bind token once. One guarded UPDATE decides, so concurrent
   * redemptions of one token yield exactly one success. Rotates the node's MQTT credentials: the
   * hash (what the embedded broker reads at CONNECT) and the sealed password (what external
   * brokers are reconciled from) in the same transaction, then the broker account is put; a
   * broker failure does not roll the bind back (spec §3.2; docs/history/decisions-2026.md "Broker sync and reconciliation").
   * @throws AppError MQTT_DISABLED, INVALID_BIND_TOKEN (unknown, expired, invalidated),
   *   BIND_TOKEN_USED, NODE_NOT_DYNAMIC
   */
  async bind(input: { bind_token: string; server_url: string; client_version: string; platform: string; hostname: string }): Promise<BindProfile> {
    this.#requireMqtt();
    const now = this.#d.clock.now();
    const hash = hashToken(input.bind_token);
    const password = randomBytes(32).toString("base64url");
    const node = await this.#d.store.transaction(async (trx) => {
      const row = await findBindToken(trx, hash);
      if (!row) throw new AppError("INVALID_BIND_TOKEN", "unknown bind token");
      if (row.state === "used") throw new AppError("BIND_TOKEN_USED", "this bind token was already used");
      if (row.state !== "valid" || row.expires_at <= now) throw new AppError("INVALID_BIND_TOKEN", "the bind token expired or was invalidated");
      if (!(await claimBindToken(trx, hash, now))) throw new AppError("BIND_TOKEN_USED", "this bind token was already used");
      const n = await getNodeById(trx, row.node_id);
      if (n.mode !== "dynamic") throw new AppError("NODE_NOT_DYNAMIC", "the node is no longer dynamic");
      const username = nodeUsername(n.config_id, n.node_id);
      const sealed = this.#d.sealBrokerPassword(username, password);
      if (sealed === null) {
        await deleteBrokerCredential(trx, username);
      } else {
        await putBrokerCredential(trx, username, sealed, now);
      }
      await recordClientBound(
        trx,
        n.node_id,
        {
          mqttUsername: nodeUsername(n.config_id, n.node_id),
          mqttPasswordHash: hashToken(password),
          clientVersion: input.client_version,
          platform: input.platform,
          hostname: input.hostname,
        },
        now,
      );
      return n;
    });
    await this.#d.registry.send(node.config_id, node.node_id, { type: "client.bound", at: now, clientVersion: input.client_version });
    // The broker account is created or rotated; an agent still connected with the old password is cut off.
    await this.#d.brokerAccountBound({
      configId: node.config_id,
      nodeId: node.node_id,
      username: nodeUsername(node.config_id, node.node_id),
      clientId: nodeClientId(node.config_id, node.node_id),
      password,
    });
    const broker = this.#d.brokerEndpoint();
    return {
      profile: { config_id: node.config_id, node_id: node.node_id, server_url: this.#d.publicUrl() },
      mqtt: {
        host: broker.host,
        port: broker.port,
        tls: broker.tls,
        username: nodeUsername(node.config_id, node.node_id),
        password,
        client_id: nodeClientId(node.config_id, node.node_id),
        ...(broker.tls && broker.caCert !== undefined ? { ca_cert: broker.caCert } : {}),
      },
      topics: nodeTopics(node.config_id, node.node_id),
    };
  }

  /**
   * spec §4 rule 12: clears runtime state, `client_initialized=false`, presence offline, deletes
   * the node's broker credentials (old ones stop working at once with the embedded broker, which
   * reads the store), invalidates bind tokens; the node machine's `revokeClient` then has the
   * broker sync delete the broker account and cut the live connection (a broker failure does not
   * block the reset: the next reconciliation removes it), and the status is published.
   * @throws AppError MQTT_DISABLED, NOT_FOUND, NODE_NOT_DYNAMIC
   */
  async reset(configId: string, nodeId: string): Promise<EndpointStatusView> {
    this.#requireMqtt();
    const now = this.#d.clock.now();
    await this.#d.store.transaction(async (trx) => {
      const node = await requireNode(trx, configId, nodeId);
      if (node.mode !== "dynamic") throw new AppError("NODE_NOT_DYNAMIC", "reset-client is for dynamic nodes");
      await clearClientCredentials(trx, nodeId, now);
    });
    await this.#d.registry.send(configId, nodeId, { type: "client.reset", at: now });
    return this.endpointStatus(configId, nodeId);
  }

  /**
   * DESIGN §5 control: start / stop go to the control topic, wg_show to the info topic (spec
   * §6.5 diagnostics flow), push_config to config/push.
   * @returns 202 body: the request_id and the control log row
   * @throws AppError MQTT_DISABLED, NOT_FOUND, NODE_NOT_DYNAMIC, CLIENT_NOT_INITIALIZED
   */
  async control(configId: string, nodeId: string, action: ControlAction): Promise<{ request_id: string; log: ControlLogView }> {
    this.#requireMqtt();
    const { node, protocol } = await this.#boundNode(configId, nodeId);
    const payload = { action, tunnel_protocol: protocol, interface_name: node.interface_name };
    const result =
      action === "push_config"
        ? await this.#push(node, protocol)
        : action === "wg_show"
          ? await this.#d.commands.send({ configId, nodeId, kind: "info", action: "wg_show", payload: { ...payload, action: "wg_show" } })
          : action === "start"
            ? await this.#start(node, protocol)
            : await this.#d.commands.send({ configId, nodeId, kind: "control", action, payload });
    if (result.log === null) throw new AppError("INTERNAL", "the command was not logged");
    return { request_id: result.requestId, log: result.log };
  }

  /**
   * Automatic push (the machine's `requestConfigPush`): debounced per node; pushes only while the
   * node is online, its config is pending (spec §3.5) and no push of the staged config is open,
   * and never while MQTT is disabled. A push a start holds until the node is online is released
   * at once.
   * A node deleted, made static or reset meanwhile is skipped (debug log). Any other failure
   * before the publish is logged with the node and stored as a `push_config` control log row
   * with status `failed` and the reason; a publish the broker refused closes the push's own row
   * as `failed` (the command tracker logs it). Nothing is swallowed (docs/history/decisions-2026.md "Failures on the command path are logged").
   */
  schedulePush(configId: string, nodeId: string): void {
    if (!this.#d.mqttEnabled) return;
    // A push a start holds for the node to come online (see #start) goes now, not after the debounce.
    const open = this.#d.commands.openPushOf(configId, nodeId);
    if (open !== undefined && this.#d.commands.isHeld(open.requestId)) void this.#d.commands.release(open.requestId);
    const k = `${configId}/${nodeId}`;
    this.#d.clock.clearTimeout(this.#pushTimers.get(k));
    this.#pushTimers.set(
      k,
      this.#d.clock.setTimeout(() => {
        this.#pushTimers.delete(k);
        void this.#autoPushes.add(() => this.#automaticPush(configId, nodeId));
      }, this.#d.configPushDebounceMs),
    );
  }

  /** One automatic push, after a turn of the event loop; never rejects (failures are recorded). */
  async #automaticPush(configId: string, nodeId: string): Promise<void> {
    await nextTurn();
    // Checked after the wait: the node may have confirmed, gone offline or been reset meanwhile.
    const p = this.#d.registry.projection(configId, nodeId);
    if (!p || p.presence !== "online" || p.sync !== "pending" || !p.clientInitialized) return;
    // The staged config is already on its way (a start's push, or the operator's): its ACK decides.
    const open = this.#d.commands.openPushOf(configId, nodeId);
    if (open !== undefined && open.pushed?.sha === p.stagedSha) return;
    try {
      const { node, protocol } = await this.#boundNode(configId, nodeId);
      await this.#push(node, protocol);
    } catch (err) {
      this.#automaticPushFailed(configId, nodeId, err);
    }
  }

  /** Cancels pending automatic pushes (shutdown). */
  stop(): void {
    for (const t of this.#pushTimers.values()) this.#d.clock.clearTimeout(t);
    this.#pushTimers.clear();
    this.#autoPushes.clear();
  }

  /** The endpoint status of a node (the `endpoint.status.updated` payload). @throws AppError NOT_FOUND */
  async endpointStatus(configId: string, nodeId: string): Promise<EndpointStatusView> {
    const node = await requireNode(this.#d.store.db, configId, nodeId);
    return endpointStatusView(node, this.#d.registry.projection(configId, nodeId), this.#d.mqttEnabled);
  }

  /**
   * The endpoint status for an SSE frame (spec §6.5 `endpoint.status.updated`) from a committed
   * projection alone: no query on the ingest path (the actor knows the node's mode and staged
   * config, DESIGN §3).
   */
  endpointStatusOf(configId: string, nodeId: string, p: NodeProjection): EndpointStatusView {
    const node = { config_id: configId, node_id: nodeId, mode: p.mode, staged_config_version: p.stagedVersion, staged_config_sha256: p.stagedSha };
    return endpointStatusView(node, p, this.#d.mqttEnabled);
  }

  /** One page of a node's control logs, newest first. @throws AppError NOT_FOUND, INVALID_CURSOR */
  controlLogPage(configId: string, nodeId: string, query: Parameters<typeof listControlLogPage>[3]): ReturnType<typeof listControlLogPage> {
    return listControlLogPage(this.#d.store, configId, nodeId, query);
  }

  /** Control logs of a node, newest first (DESIGN §5). */
  async controlLogs(configId: string, nodeId: string, limit: number): Promise<ControlLogView[]> {
    await requireNode(this.#d.store.db, configId, nodeId);
    const rows = await listControlLogs(this.#d.store.db, nodeId, limit);
    return rows.map(controlLogView);
  }

  #automaticPushFailed(configId: string, nodeId: string, err: unknown): void {
    if (err instanceof AppError && (err.code === "NOT_FOUND" || err.code === "NODE_NOT_DYNAMIC" || err.code === "CLIENT_NOT_INITIALIZED")) {
      this.#d.log.debug({ config_id: configId, node_id: nodeId, code: err.code }, "automatic config push skipped: the node was deleted, made static or reset");
      return;
    }
    const reason = err instanceof Error ? err.message : String(err);
    this.#d.commands.recordFailure(configId, nodeId, "push_config", `automatic config push not sent: ${reason}`);
  }

  /**
   * Sends the node's staged config (spec §3.5, §6.3 push_config). A node a large write staged
   * lazily and not rendered yet, or whose stored text is gone, is rendered now, as a download
   * would render it (docs/history/decisions-2026.md "A push renders a lazily staged node"); its actor then
   * learns the staged sha before the push goes out, so the ACK finds it.
   * @throws AppError CONFLICT when the node has no staged config (never staged, or its config is gone)
   */
  async #push(node: NodeRow, protocol: TunnelProtocol) {
    return this.#d.commands.send(await this.#pushCommand(node, protocol));
  }

  /** The push of the node's staged config, its actor told of the staged pair first (see {@link #push}). @throws AppError CONFLICT */
  async #pushCommand(node: NodeRow, protocol: TunnelProtocol): Promise<CommandToSend> {
    const staged = await materializeStaged(this.#d.store.db, node);
    if (staged === null) throw new AppError("CONFLICT", "the node has no staged config");
    const { config_version: version, config_sha256: sha, config_text: text } = staged;
    // Only a hitless config names its mode: the default push is exactly the spec's payload.
    const hitless = (await getConfigApplyMode(this.#d.store.db, node.config_id)) === "hitless";
    const p = this.#d.registry.projection(node.config_id, node.node_id);
    if (p !== undefined && (p.stagedVersion !== version || p.stagedSha !== sha)) {
      await this.#d.registry.send(node.config_id, node.node_id, { type: "config.staged", at: this.#d.clock.now(), version, sha });
    }
    return {
      configId: node.config_id,
      nodeId: node.node_id,
      kind: "config_push",
      action: "push_config",
      payload: {
        action: "push_config",
        tunnel_protocol: protocol,
        previous_tunnel_protocol: p?.confirmedProtocol ?? protocol,
        interface_name: node.interface_name,
        config_version: version,
        config_sha256: sha,
        config_text: text,
        ...(hitless ? { apply_mode: "hitless" as const } : {}),
      },
      pushed: { version, sha, protocol },
    };
  }

  /**
   * `start` (spec §6.3). A host that has not confirmed the staged config (spec §3.5: never, or
   * an older one) may have no config file to start (spec §3.8 writes it), so the start goes out
   * only after a config push's `applied` ACK, as one operation in the control log (spec §2.8):
   * the push row first (the node's open push if there is one, else a new push: published at once
   * while the node is online, else held until it comes online — a message before the agent has
   * subscribed would be lost), then the start row, `pending` with a message saying what it waits
   * for. A push that ends `failed` or `timed_out` closes the start `failed`, unsent.
   * @returns the start's request_id and its row
   * @throws AppError CONFLICT when a push is needed and the node has no staged config
   */
  async #start(node: NodeRow, protocol: TunnelProtocol): Promise<{ requestId: string; log: ControlLogView | null }> {
    const { config_id: configId, node_id: nodeId } = node;
    const start: CommandToSend = { configId, nodeId, kind: "control", action: "start", payload: { action: "start", tunnel_protocol: protocol, interface_name: node.interface_name } };
    const before = this.#d.registry.projection(configId, nodeId);
    if (before === undefined || before.sync === "latest") return this.#d.commands.send(start);
    const first = before.confirmedSha === null;
    const waiting = (push: OpenCommand) =>
      `${first ? "waiting for the first config" : `waiting for config v${push.pushed?.version ?? "?"}`}: sent when config push ${push.requestId} is applied`;
    const open = this.#d.commands.openPushOf(configId, nodeId);
    if (open !== undefined) {
      const chained = await this.#d.commands.sendAfter(open.requestId, start, waiting);
      if (chained !== null) return chained;
    }
    const push = await this.#pushCommand(node, protocol);
    const online = this.#d.registry.projection(configId, nodeId)?.presence === "online";
    const hold = online ? undefined : { message: "waiting for the host to connect", timeout: "not sent: the host did not come online in time" };
    const chained = await this.#d.commands.sendAfter({ command: push, ...(hold ? { hold } : {}) }, start, waiting);
    if (chained === null) throw new AppError("INTERNAL", "the start was not written");
    return chained;
  }

  async #boundNode(configId: string, nodeId: string): Promise<{ node: NodeRow; protocol: TunnelProtocol }> {
    const node = await requireNode(this.#d.store.db, configId, nodeId);
    if (node.mode !== "dynamic") throw new AppError("NODE_NOT_DYNAMIC", "endpoint control is for dynamic nodes");
    if (!this.#d.registry.projection(configId, nodeId)?.clientInitialized) {
      throw new AppError("CLIENT_NOT_INITIALIZED", "no client has bound to this node yet");
    }
    return { node, protocol: await getConfigTunnelProtocol(this.#d.store.db, configId) };
  }

  #requireMqtt(): void {
    if (!this.#d.mqttEnabled) throw new AppError("MQTT_DISABLED", "MQTT services are disabled (SVC_ENABLE_MQTT_SERVICES=false)");
  }
}

/**
 * Removes a node's broker credentials and client state and invalidates its bind tokens (reset,
 * and dynamic → static: spec §3.1). Run inside the caller's transaction.
 */
export async function clearClientCredentials(trx: Db, nodeId: string, now: number): Promise<void> {
  // The sealed copy of the password goes with the hash (docs/history/decisions-2026.md "Broker passwords"):
  // it is found through the username the client state still holds, so it goes first.
  await deleteBrokerCredentialsOfNode(trx, nodeId);
  await clearClientState(trx, nodeId, now);
  await invalidateBindTokensOf(trx, nodeId);
}

/** The node columns an endpoint status needs. */
export type EndpointStatusNode = Pick<NodeRow, "config_id" | "node_id" | "mode" | "staged_config_version" | "staged_config_sha256">;

/** Builds the endpoint status from the node row and its actor's projection. */
export function endpointStatusView(node: EndpointStatusNode, p: NodeProjection | undefined, mqttEnabled: boolean): EndpointStatusView {
  const facts = p && {
    initialized: p.clientInitialized,
    presence: p.presence,
    runtime: p.runtime,
    lastReachableAt: p.lastReachableAt,
    clientVersion: p.clientVersion,
    confirmedSha: p.confirmedSha,
  };
  return {
    config_id: node.config_id,
    node_id: node.node_id,
    mode: node.mode,
    ...clientView(node, facts, mqttEnabled),
    staged_config: { config_version: node.staged_config_version, config_sha256: node.staged_config_sha256 },
    confirmed_config: { config_version: p?.confirmedVersion ?? null, config_sha256: p?.confirmedSha ?? null },
    mqtt_enabled: mqttEnabled,
  };
}
