import { randomUUID } from "node:crypto";
import PQueue from "p-queue";
import type { z } from "zod";
import { isoTime, type Clock } from "../lib/clock.js";
import type { Logger } from "../logger.js";
import type { AckPayload, Envelope } from "../protocol/envelope.schema.js";
import type { CommandStatus, FinalCommandStatus } from "../protocol/enums.js";
import { nodeTopic, type DownstreamKind } from "../protocol/topics.js";
import type { controlLogViewSchema } from "../protocol/views.schema.js";
import {
  createCommandLogStatements,
  insertCommandLog,
  listOpenCommandLogs,
  pushTargetOf,
  type CommandLogStatements,
  type PushTarget,
} from "../store/commands.repository.js";
import type { Store } from "../store/db.js";
import type { ControlLogRow } from "../store/schema.js";

/**
 * Commands to agents and their closing ACKs (spec §6.4 rules 1–2, §3.4, §2.8). The control log
 * row is written before the downstream message is published with a fresh `request_id`; only an
 * ACK with that `request_id`, from the same node, on the matching ACK topic closes it
 * (accepted → applied | failed). Duplicate, late, unknown and foreign ACKs change nothing and
 * are logged. A command without a final ACK within `timeoutMs` ends as `timed_out`. Detects are
 * tracked the same way but not logged as control logs (one every 2 minutes per node would bury
 * the operator's own commands).
 */

export type CommandKind = DownstreamKind;

/** The ACK topic kind that answers each command kind. */
export const ACK_KIND_OF: Record<CommandKind, "config_push_ack" | "control_ack" | "detect_ack" | "info_ack"> = {
  config_push: "config_push_ack",
  control: "control_ack",
  detect: "detect_ack",
  info: "info_ack",
};

/** One control log row as answered and published (spec §6.4); the shape is the protocol schema's. */
export type ControlLogView = z.output<typeof controlLogViewSchema>;

export interface OpenCommand {
  requestId: string;
  configId: string;
  nodeId: string;
  kind: CommandKind;
  action: string;
  logId: number | null;
  /**
   * For config pushes: the pair the agent is asked to apply. Stored on the control log row, so a
   * push re-armed after a restart still confirms it (spec §3.5, §9 rule 4; docs/decisions.md
   * "A config push keeps its target on its control log row").
   */
  pushed: PushTarget | null;
  status: Extract<CommandStatus, "pending" | "accepted">;
  timer: unknown;
}

/** One command for {@link CommandTracker.send}. */
export interface CommandToSend {
  configId: string;
  nodeId: string;
  /** The downstream topic kind; a `detect` writes no control log row. */
  kind: CommandKind;
  /** The control log `action` (`start`, `stop`, `push_config`, `wg_show`, `detect`). */
  action: string;
  /** The envelope's `payload` (spec §6.3), sent as given. */
  payload: Record<string, unknown>;
  /** For config pushes: the pair the agent is asked to apply (stored on the row); else null (the default). */
  pushed?: OpenCommand["pushed"];
}

export interface CommandTrackerDeps {
  store: Store;
  clock: Clock;
  log: Logger;
  /** ms until an unanswered command ends as timed_out (DESIGN §3: 60 s). */
  timeoutMs: number;
  /** ms a detect waits for its ACK (DESIGN §3: 20 s); the node machine keeps its own timer. */
  detectTimeoutMs: number;
  /** Publishes one envelope (QoS 1, not retained); rejects when the broker did not take it. */
  publish(topic: string, envelope: Envelope): Promise<void>;
  /** After a control log row was written (SSE control.log.created / control.log.updated). */
  onLog(change: "created" | "updated", log: ControlLogView): void;
  /** A command ended without an ACK in time (detects: the node machine runs its own timeout). */
  onTimeout(command: OpenCommand): void;
  /**
   * The broker did not take the command (the publish rejected); the command is already closed
   * as `failed` and logged. Detects: the node machine must hear `detect.failed` (spec §3.1).
   * Must not throw.
   */
  onPublishFailed?(command: OpenCommand, message: string): void;
  /** A command reached its final status (metrics `svc_commands_total`); must not throw. */
  onFinal?(command: OpenCommand, status: FinalCommandStatus): void;
  /**
   * Inside the transaction that writes a command's final status (the alert rules: a failed
   * command's alert commits with it); answers what to run after the commit. Must not throw.
   */
  inFinalWrite?(command: OpenCommand, status: FinalCommandStatus, message: string): (() => void) | undefined;
  /** Config pushes published at once at most (a 1,000-node re-stage must not flood the broker); default {@link PUSH_CONCURRENCY}. */
  pushConcurrency?: number;
}

/** Config pushes in flight (published, PUBACK not yet back) at most, by default. */
export const PUSH_CONCURRENCY = 32;

/** Longest failure message stored by {@link CommandTracker.recordFailure}, characters (ACK messages are bounded alike). */
const MAX_FAILURE_MESSAGE = 4000;

/** A stored control log row (the store's own type, not a copy of it). */
type LogRow = ControlLogRow;

/** Wire shape of a control log row. */
export function controlLogView(row: LogRow): ControlLogView {
  return {
    log_id: row.log_id,
    config_id: row.config_id,
    node_id: row.node_id,
    request_id: row.request_id,
    kind: row.kind,
    action: row.action,
    status: row.status,
    message: row.message,
    stream: row.stream,
    output: row.output,
    level: row.level,
    event: row.event,
    created_at: isoTime(row.created_at),
    updated_at: isoTime(row.updated_at),
  };
}

export class CommandTracker {
  readonly #deps: CommandTrackerDeps;
  readonly #open = new Map<string, OpenCommand>();
  readonly #logs: CommandLogStatements;
  /** Bounds config pushes in flight; other commands are single and go straight out. */
  readonly #pushes: PQueue;
  /** Open commands written but not published yet (see {@link CommandTracker.sendAfter}): their envelopes. */
  readonly #held = new Map<string, Envelope>();
  /** request_id → held commands its `applied` ACK releases (and any other end fails). */
  readonly #released = new Map<string, string[]>();
  /** `config_id/node_id` → the node's newest open config push (held or sent). */
  readonly #openPush = new Map<string, OpenCommand>();
  /** Envelopes the broker took (PUBACK received), for metrics; read at scrape time. */
  published = 0;

  constructor(deps: CommandTrackerDeps) {
    this.#deps = deps;
    this.#logs = createCommandLogStatements(deps.store);
    this.#pushes = new PQueue({ concurrency: deps.pushConcurrency ?? PUSH_CONCURRENCY });
  }

  /** Number of commands waiting for a final ACK. */
  get openCount(): number {
    return this.#open.size;
  }

  /**
   * Re-arms the timeouts of commands left open by a previous run, with the time left; a late
   * ACK can still close them. A config push gets back the pair it pushed (stored on its row), so
   * its `applied` ACK still confirms it (spec §3.5, §9 rule 4). A command the previous run held
   * unpublished (`pending` with the message of what it waited for, see {@link sendAfter}) was
   * never sent, so no ACK can come: it is closed `failed`, saying so, and the operator sends it
   * again (an automatic push follows the node's next signal by itself).
   */
  start(): void {
    const now = this.#deps.clock.now();
    for (const row of listOpenCommandLogs(this.#deps.store)) {
      if (row.request_id === null) continue;
      if (row.status === "pending" && (row.message ?? "") !== "") {
        const unsent = { requestId: row.request_id, configId: row.config_id, nodeId: row.node_id, kind: "control" as const, action: row.action ?? "", logId: row.log_id, pushed: null, status: "pending" as const, timer: null };
        this.#writeStatus(unsent, "failed", `not sent: the service restarted while the command was held (${row.message}); send it again`);
        this.#deps.onFinal?.(unsent, "failed");
        continue;
      }
      const kind = (row.action === "push_config" ? "config_push" : row.action === "wg_show" ? "info" : "control") as CommandKind;
      const { target, invalid } = pushTargetOf(row);
      if (invalid || (kind === "config_push" && target === null)) {
        this.#deps.log.warn(
          { config_id: row.config_id, node_id: row.node_id, request_id: row.request_id, log_id: row.log_id },
          "open config push re-armed without a valid push target: its ACK will not confirm a config",
        );
      }
      this.#track({
        requestId: row.request_id,
        configId: row.config_id,
        nodeId: row.node_id,
        kind,
        action: row.action ?? "",
        logId: row.log_id,
        pushed: kind === "config_push" ? target : null,
        status: row.status === "accepted" ? "accepted" : "pending",
        timer: null,
      }, Math.max(0, row.created_at + this.#deps.timeoutMs - now));
    }
  }

  /**
   * Writes the control log row (not for detects), then publishes the command.
   * @returns the request_id and the log row (null for detects)
   */
  async send(cmd: CommandToSend): Promise<{ requestId: string; log: ControlLogView | null }> {
    const { command, envelope } = this.#write(cmd, "");
    this.#track(command, cmd.kind === "detect" ? this.#deps.detectTimeoutMs : this.#deps.timeoutMs);
    await this.#publish(command, envelope);
    return { requestId: command.requestId, log: this.#logOf(command) };
  }

  /**
   * One operation of two commands (a start after the config push it needs: spec §3.5, §3.8,
   * §2.8): `then` is written now, `pending` with `message(first)` saying what it waits for, and
   * published only when `first` closes `applied`; when `first` ends `failed` or `timed_out`,
   * `then` is closed `failed` without being sent. Each keeps its own request_id, row and ACKs
   * (spec §6.4 rule 2). `first` is an open command's request_id, or a new command written now
   * (so its row comes before `then`'s) and published at once, or with `hold` kept unpublished
   * until {@link release} (`hold` is its row's message; unreleased, it ends `timed_out` after
   * `timeoutMs` with `holdTimeout` as the message).
   * @returns `then`'s request_id and its row as it stands after `first` was published; null
   *   when `first` is a request_id that is no longer open (nothing was written)
   */
  async sendAfter(
    first: string | { command: CommandToSend; hold?: { message: string; timeout: string } },
    then: CommandToSend,
    message: (first: OpenCommand) => string,
  ): Promise<{ requestId: string; log: ControlLogView | null; firstRequestId: string } | null> {
    let head: OpenCommand;
    let headEnvelope: Envelope | null = null;
    if (typeof first === "string") {
      const open = this.#open.get(first);
      if (open === undefined) return null;
      head = open;
    } else {
      const written = this.#write(first.command, first.hold?.message ?? "");
      head = written.command;
      this.#track(head, this.#deps.timeoutMs, first.hold?.timeout);
      if (first.hold === undefined) headEnvelope = written.envelope;
      else this.#held.set(head.requestId, written.envelope);
    }
    const { command, envelope } = this.#write(then, message(head));
    // No timer of its own while it waits: `first` ends in time (its ACK timeout or its hold's).
    this.#open.set(command.requestId, command);
    this.#held.set(command.requestId, envelope);
    this.#released.set(head.requestId, [...(this.#released.get(head.requestId) ?? []), command.requestId]);
    if (headEnvelope !== null) await this.#publish(head, headEnvelope);
    return { requestId: command.requestId, log: this.#logOf(command), firstRequestId: head.requestId };
  }

  /**
   * Publishes a held command now; its ACK timeout starts now. Nothing happens when it is not
   * held (already released, or closed). Never rejects: a publish the broker refused closes it.
   */
  async release(requestId: string): Promise<void> {
    const envelope = this.#held.get(requestId);
    const command = this.#open.get(requestId);
    if (envelope === undefined || command === undefined) return;
    this.#held.delete(requestId);
    this.#deps.clock.clearTimeout(command.timer);
    this.#track(command, this.#deps.timeoutMs);
    // Sent: its row no longer says what it waits for (a row pending with a message is one never published).
    this.#writeStatus(command, "pending", "");
    await this.#publish(command, { ...envelope, sent_at: isoTime(this.#deps.clock.now()) });
  }

  /** The node's newest open config push, held or sent; undefined when none is open. */
  openPushOf(configId: string, nodeId: string): OpenCommand | undefined {
    return this.#openPush.get(`${configId}/${nodeId}`);
  }

  /** True while an open command is written but not published (see {@link sendAfter}). */
  isHeld(requestId: string): boolean {
    return this.#held.has(requestId);
  }

  /** Writes the command's control log row (not for detects) and builds its envelope. */
  #write({ configId, nodeId, kind, action, payload, pushed = null }: CommandToSend, message: string): { command: OpenCommand; envelope: Envelope } {
    const now = this.#deps.clock.now();
    const requestId = randomUUID();
    let logId: number | null = null;
    if (kind !== "detect") {
      logId = insertCommandLog(this.#deps.store, { configId, nodeId, requestId, action, status: "pending", message, at: now, pushed });
      this.#deps.onLog("created", controlLogView(this.#logs.byId(logId) as LogRow));
    }
    const command: OpenCommand = { requestId, configId, nodeId, kind, action, logId, pushed, status: "pending", timer: null };
    const envelope: Envelope = {
      type: kind === "config_push" ? "config_push" : kind,
      request_id: requestId,
      config_id: configId,
      node_id: nodeId,
      boot_id: "",
      session_id: "",
      sent_at: isoTime(now),
      payload,
    };
    return { command, envelope };
  }

  /** Publishes an open command; a publish the broker refused closes it `failed`. Never rejects. */
  async #publish(command: OpenCommand, envelope: Envelope): Promise<void> {
    const { configId, nodeId, kind, requestId, action, logId } = command;
    try {
      const publish = () => this.#deps.publish(nodeTopic(configId, nodeId, kind), envelope);
      await (kind === "config_push" ? this.#pushes.add(publish) : publish());
    } catch (err) {
      const message = `publish to the broker failed: ${err instanceof Error ? err.message : String(err)}`;
      this.#deps.log.warn({ config_id: configId, node_id: nodeId, request_id: requestId, action, log_id: logId, err: message }, "command not sent");
      this.#close(command, "failed", message);
      this.#deps.onPublishFailed?.(command, message);
      return;
    }
    this.published++;
  }

  #logOf(command: OpenCommand): ControlLogView | null {
    return command.logId === null ? null : controlLogView(this.#logs.byId(command.logId) as LogRow);
  }

  /**
   * Matches an ACK to its open command.
   * @returns the command when the ACK belongs to it (its status then moved), else null — an
   *   unknown, late, duplicate or foreign ACK, which changes nothing
   */
  ack(
    ackKind: "config_push_ack" | "control_ack" | "detect_ack" | "info_ack",
    configId: string,
    nodeId: string,
    requestId: string,
    payload: AckPayload,
  ): OpenCommand | null {
    const command = this.#open.get(requestId);
    if (!command || command.configId !== configId || command.nodeId !== nodeId || ACK_KIND_OF[command.kind] !== ackKind) {
      this.#deps.log.warn(
        { config_id: configId, node_id: nodeId, request_id: requestId, ack: ackKind, status: payload.status },
        command ? "foreign ACK ignored" : "ACK for no open command ignored (unknown, late or duplicate)",
      );
      return null;
    }
    if (payload.status === "accepted") {
      if (command.status === "accepted") {
        this.#deps.log.warn({ request_id: requestId }, "duplicate accepted ACK ignored");
        return null;
      }
      command.status = "accepted";
      this.#writeStatus(command, "accepted", payload.message);
      return command;
    }
    this.#close(command, payload.status, payload.message);
    return command;
  }

  /**
   * Records a command that could not be sent at all (an automatic config push whose node or
   * config could not be read, ...): a `command` control log row with status `failed`, no
   * `request_id`, and `message` saying why (spec §2.8: where the operator looks), plus a warning
   * log line naming the node. Counted as a failed command in metrics.
   * @returns the stored row, or null when it could not be stored (the node is gone; logged)
   */
  recordFailure(configId: string, nodeId: string, action: string, reason: string): ControlLogView | null {
    const message = reason.length > MAX_FAILURE_MESSAGE ? `${reason.slice(0, MAX_FAILURE_MESSAGE)}…` : reason;
    this.#deps.log.warn({ config_id: configId, node_id: nodeId, action, err: message }, "command failed before it was sent");
    let logId: number;
    try {
      logId = insertCommandLog(this.#deps.store, { configId, nodeId, requestId: null, action, status: "failed", message, at: this.#deps.clock.now(), pushed: null });
    } catch (err) {
      this.#deps.log.warn({ config_id: configId, node_id: nodeId, action, err: String(err) }, "the failed command could not be logged");
      return null;
    }
    const log = controlLogView(this.#logs.byId(logId) as LogRow);
    this.#deps.onLog("created", log);
    this.#deps.onFinal?.(
      { requestId: "", configId, nodeId, kind: action === "push_config" ? "config_push" : "control", action, logId, pushed: null, status: "pending", timer: null },
      "failed",
    );
    return log;
  }

  /** Cancels every timer (shutdown); open commands stay open in the store for the next run. */
  stop(): void {
    for (const c of this.#open.values()) this.#deps.clock.clearTimeout(c.timer);
    this.#open.clear();
    this.#held.clear();
    this.#released.clear();
    this.#openPush.clear();
  }

  #track(command: OpenCommand, timeoutMs: number, timeoutMessage = "no final ACK before the timeout"): void {
    command.timer = this.#deps.clock.setTimeout(() => {
      if (!this.#open.has(command.requestId)) return;
      this.#close(command, "timed_out", timeoutMessage);
      this.#deps.onTimeout(command);
    }, timeoutMs);
    this.#open.set(command.requestId, command);
    if (command.kind === "config_push") this.#openPush.set(`${command.configId}/${command.nodeId}`, command);
  }

  #close(command: OpenCommand, status: FinalCommandStatus, message: string): void {
    this.#open.delete(command.requestId);
    this.#held.delete(command.requestId);
    if (command.kind === "config_push") {
      // Detects (most closes at scale) have no entry here: no key is built for them.
      const key = `${command.configId}/${command.nodeId}`;
      if (this.#openPush.get(key) === command) this.#openPush.delete(key);
    }
    this.#deps.clock.clearTimeout(command.timer);
    const inFinalWrite = this.#deps.inFinalWrite;
    if (inFinalWrite === undefined || command.logId === null) this.#writeStatus(command, status, message);
    else {
      const logId = command.logId;
      const after = this.#logs.inTransaction(() => {
        this.#logs.writeStatus(logId, status, message, this.#deps.clock.now());
        return inFinalWrite(command, status, message);
      });
      this.#announce(logId);
      after?.();
    }
    this.#deps.onFinal?.(command, status);
    this.#releaseAfter(command, status, message);
  }

  /** The commands waiting for `command` (see {@link sendAfter}): sent when it applied, else closed failed unsent. */
  #releaseAfter(command: OpenCommand, status: FinalCommandStatus, message: string): void {
    const waiting = this.#released.get(command.requestId);
    if (waiting === undefined) return;
    this.#released.delete(command.requestId);
    for (const requestId of waiting) {
      if (status === "applied") {
        void this.release(requestId);
        continue;
      }
      const held = this.#open.get(requestId);
      const why = message === "" ? status : `${status}: ${message}`;
      if (held !== undefined) this.#close(held, "failed", `not sent: ${command.action} ${command.requestId} ended ${why}`);
    }
  }

  #writeStatus(command: OpenCommand, status: CommandStatus, message: string): void {
    if (command.logId === null) return;
    this.#logs.writeStatus(command.logId, status, message, this.#deps.clock.now());
    this.#announce(command.logId);
  }

  /** After its write: the row as stored now goes out (`control.log.updated`). */
  #announce(logId: number): void {
    // The row is gone when its node was deleted or a snapshot was restored meanwhile.
    const row = this.#logs.byId(logId) as LogRow | undefined;
    if (row !== undefined) this.#deps.onLog("updated", controlLogView(row));
  }
}
