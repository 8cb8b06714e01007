import { z } from "zod";

/**
 * The enums of the wire contract (DESIGN §2), declared once: REST bodies and answers, SSE
 * payloads, MQTT envelopes, snapshot rows, store columns, the node statechart and the services
 * take their values and types from here. Each is a zod enum of its wire strings and the type
 * derived from it.
 */

/** A node's mode (spec §2.3); also its `effective_mode` (spec §1.7). */
export const NODE_MODES = ["static", "dynamic"] as const;
export const nodeModeSchema = z.enum(NODE_MODES);
export type NodeMode = z.output<typeof nodeModeSchema>;

/** A config's tunnel protocol (spec §2.2). */
export const TUNNEL_PROTOCOLS = ["wireguard", "awg_2"] as const;
export const tunnelProtocolSchema = z.enum(TUNNEL_PROTOCOLS);
export type TunnelProtocol = z.output<typeof tunnelProtocolSchema>;

/** A node client's presence (spec §3.1). */
export const PRESENCE_STATES = ["online", "dropped", "offline"] as const;
export const presenceStateSchema = z.enum(PRESENCE_STATES);
export type PresenceState = z.output<typeof presenceStateSchema>;

/** A node client's runtime state (spec §3.3). */
export const RUNTIME_STATES = ["unknown", "running", "stopped"] as const;
export const runtimeStateSchema = z.enum(RUNTIME_STATES);
export type RuntimeState = z.output<typeof runtimeStateSchema>;

/** Whether a dynamic node confirmed its staged config (spec §3.5). */
export const CONFIG_VERSION_STATES = ["latest", "pending"] as const;
export const configVersionStateSchema = z.enum(CONFIG_VERSION_STATES);
export type ConfigVersionState = z.output<typeof configVersionStateSchema>;

/** The `status` of an ACK payload (spec §6.3). */
export const ACK_STATUSES = ["accepted", "applied", "failed"] as const;
export const ackStatusSchema = z.enum(ACK_STATUSES);
export type AckStatus = z.output<typeof ackStatusSchema>;

/** A command's status in its control log row (spec §3.4, §6.4): pending until ACKed, then final. */
export const COMMAND_STATUSES = ["pending", "accepted", "applied", "failed", "timed_out"] as const;
export const commandStatusSchema = z.enum(COMMAND_STATUSES);
export type CommandStatus = z.output<typeof commandStatusSchema>;
/** The final statuses of spec §3.4 a command can end in. */
export type FinalCommandStatus = Extract<CommandStatus, "applied" | "failed" | "timed_out">;

/** The actions of the control topic (spec §6.3). */
export const CONTROL_ACTIONS = ["start", "stop", "push_config", "wg_show"] as const;
export const controlActionSchema = z.enum(CONTROL_ACTIONS);
export type ControlAction = z.output<typeof controlActionSchema>;

/** What a control log row records (spec §6.4): a command, its output, or a client event. */
export const CONTROL_LOG_KINDS = ["command", "output", "event"] as const;
export const controlLogKindSchema = z.enum(CONTROL_LOG_KINDS);
export type ControlLogKind = z.output<typeof controlLogKindSchema>;

/**
 * How a config's pushes are applied on a host whose interface runs: `restart` is the spec's push
 * sequence (§3.8: stop, write, start); `hitless` changes the peers of the running interface when
 * only peers changed, and falls back to §3.8 otherwise (docs/decisions.md "Hitless peer updates").
 */
export const APPLY_MODES = ["restart", "hitless"] as const;
export const applyModeSchema = z.enum(APPLY_MODES);
export type ApplyMode = z.output<typeof applyModeSchema>;
