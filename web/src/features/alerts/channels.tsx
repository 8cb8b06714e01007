import { useState } from "react";
import { useGate } from "../../api/roles.js";
import type { ChannelView, DeliveryView } from "../../api/types.js";
import { ConfirmDialog } from "../../components/confirm-dialog.js";
import { DeleteDialog } from "../../components/delete-dialog.js";
import { FormError } from "../../components/form-error.js";
import { RelativeTime } from "../../components/relative-time.js";
import { QueryView } from "../../components/states.js";
import { errorMessage } from "../../api/client.js";
import { ChannelForm, KIND_LABEL } from "./channel-form.js";
import { DeliveryStatusBadge } from "./deliveries.js";
import { useDeleteChannel, useRotateChannelSecret, useTestChannel, useUpdateChannel } from "./mutations.js";
import type { useAlertChannels } from "./queries.js";
import { TableHead } from "../../components/table-head.js";
import { SecretOnce } from "../../components/secret-once.js";

/** A webhook's signing secret just answered (creation or rotation): shown this once. */
interface FreshSecret {
  name: string;
  secret: string;
  rotated: boolean;
}

/**
 * The channels part of the Alerts page: a webhook's secret once after creation or rotation, the
 * new-channel form (or the edit of one), and the list with each channel's state and actions.
 */
export function ChannelsSection({ query }: { query: ReturnType<typeof useAlertChannels> }) {
  const [editing, setEditing] = useState<ChannelView | null>(null);
  const [secret, setSecret] = useState<FreshSecret | null>(null);
  const [deleting, setDeleting] = useState<ChannelView | null>(null);
  const [rotating, setRotating] = useState<ChannelView | null>(null);
  const remove = useDeleteChannel();
  const onCreated = (c: ChannelView & { secret?: string | undefined }) => {
    if (c.secret !== undefined) setSecret({ name: c.name, secret: c.secret, rotated: false });
  };
  return (
    <>
      {secret !== null && <NewSecret fresh={secret} onDone={() => setSecret(null)} />}
      <ChannelForm key={editing?.channel_id ?? "new"} channel={editing} onCreated={onCreated} onDone={() => setEditing(null)} />
      <section className="card" aria-labelledby="channel-list-title">
        <h2 id="channel-list-title">Channels</h2>
        <QueryView query={query} isEmpty={(d) => d.channels.length === 0} empty={<p>No channels yet: create one above, then press Test.</p>} loadingLabel="Loading channels…">
          {(data) => <ChannelsTable channels={data.channels} onEdit={setEditing} onDelete={setDeleting} onRotate={setRotating} />}
        </QueryView>
      </section>
      <DeleteDialog item={deleting} what="channel" nameOf={(c) => c.name} remove={remove} onClose={() => setDeleting(null)}>
        <p>Its delivery log goes with it, and its waiting deliveries are never sent. Rules that name it stop sending to it.</p>
      </DeleteDialog>
      <RotateSecretDialog channel={rotating} onClose={() => setRotating(null)} onRotated={(c) => setSecret({ name: c.name, secret: c.secret, rotated: true })} />
    </>
  );
}

/** The signing secret of a webhook channel just made or rotated: shown this once, with Copy; Done forgets it. */
function NewSecret({ fresh, onDone }: { fresh: FreshSecret; onDone: () => void }) {
  const title = `${fresh.rotated ? "New signing secret" : "Signing secret"} of “${fresh.name}”`;
  return (
    <SecretOnce id="channel-secret-title" title={title} secret={fresh.secret} secretLabel="Webhook signing secret" copyLabel="signing secret" onDone={onDone}>
      The receiver verifies each request’s <code>webhook-signature</code> with it
      {fresh.rotated ? "; the previous secret keeps signing beside it for 24 hours" : ""}.
    </SecretOnce>
  );
}

interface RowActions {
  onEdit: (c: ChannelView) => void;
  onDelete: (c: ChannelView) => void;
  onRotate: (c: ChannelView) => void;
}

function ChannelsTable({ channels, ...actions }: { channels: ChannelView[] } & RowActions) {
  return (
    <div className="table-wrap">
      <table className="table stack-table channels-table">
        <caption className="visually-hidden">Alert channels</caption>
        <TableHead columns={["Name", "Kind", "Target", "State", "Failing since"]} hidden="Actions" />
        {channels.map((c) => (
          <ChannelRow key={c.channel_id} channel={c} {...actions} />
        ))}
      </table>
    </div>
  );
}

/** What a channel sends to, without secrets: a URL (a Slack one: its origin), or the SMTP server and addresses. */
export function targetText(c: ChannelView): string {
  const t = c.target;
  if (c.kind !== "email") return t.url ?? "—";
  const server = `${t.host ?? "?"}${t.port === undefined ? "" : `:${t.port}`}${t.tls_mode === undefined ? "" : ` (${t.tls_mode})`}`;
  return `${t.from ?? "?"} → ${(t.to ?? []).join(", ")} via ${server}${t.username === undefined ? "" : ` as ${t.username}`}`;
}

/**
 * One channel (its own `<tbody>`: the row and, once Test was pressed, the test's outcome under
 * it): name, kind, target, state (disabled: why and since when), failing since; Test, Edit,
 * Enable or Disable, Rotate secret (webhook), Delete.
 */
function ChannelRow({ channel: c, onEdit, onDelete, onRotate }: { channel: ChannelView } & RowActions) {
  const test = useTestChannel();
  const toggle = useUpdateChannel();
  const gates = { test: useGate("testAlertChannel"), update: useGate("updateAlertChannel"), rotate: useGate("rotateAlertChannelSecret"), remove: useGate("deleteAlertChannel") };
  return (
    <tbody>
      <tr>
        <th scope="row">{c.name}</th>
        <td data-label="Kind" className="channel-kind">
          {KIND_LABEL[c.kind]}
        </td>
        <td data-label="Target" className="mono break channel-target">
          {targetText(c)}
        </td>
        <td data-label="State">
          <ChannelState channel={c} />
        </td>
        <td data-label="Failing since">{c.failing_since === null ? <span className="muted">not failing</span> : <RelativeTime iso={c.failing_since} />}</td>
        <td className="actions">
          <div className="actions">
            <button type="button" {...gates.test.props} aria-label={`Test ${c.name}`} disabled={gates.test.disabled || test.isPending} onClick={() => test.mutate(c)}>
              {test.isPending ? "Testing…" : "Test"}
            </button>
            <button type="button" {...gates.update.props} aria-label={`Edit ${c.name}`} disabled={gates.update.disabled} onClick={() => onEdit(c)}>
              Edit
            </button>
            <button type="button" {...gates.update.props} aria-label={`${c.enabled ? "Disable" : "Enable"} ${c.name}`} disabled={gates.update.disabled || toggle.isPending} onClick={() => toggle.mutate({ channel: c, body: { enabled: !c.enabled } })}>
              {c.enabled ? "Disable" : "Enable"}
            </button>
            {c.kind === "webhook" && (
              <button type="button" {...gates.rotate.props} aria-label={`Rotate the secret of ${c.name}`} disabled={gates.rotate.disabled} onClick={() => onRotate(c)}>
                Rotate secret
              </button>
            )}
            <button type="button" {...gates.remove.props} className="danger-outline" aria-label={`Delete ${c.name}`} disabled={gates.remove.disabled} onClick={() => onDelete(c)}>
              Delete
            </button>
          </div>
          <FormError error={toggle.error} />
        </td>
      </tr>
      {(test.data !== undefined || test.isError) && (
        <tr className="channel-test">
          <td colSpan={6}>{test.isError ? <TestRefused name={c.name} error={test.error} /> : test.data !== undefined && <TestOutcome name={c.name} delivery={test.data} />}</td>
        </tr>
      )}
    </tbody>
  );
}

/** Enabled, or disabled with the reason and since when; a rotated secret's grace period. */
function ChannelState({ channel: c }: { channel: ChannelView }) {
  return (
    <>
      {c.enabled ? <span className="badge badge-online">enabled</span> : <span className="badge badge-offline">disabled</span>}
      {!c.enabled && (
        <span className="channel-disabled small">
          {" "}
          {c.disabled_reason ?? "disabled"}
          {c.disabled_at !== null && (
            <>
              {" "}
              (since <RelativeTime iso={c.disabled_at} />)
            </>
          )}
        </span>
      )}
      {c.previous_secret_until !== null && (
        <span className="muted small block">
          previous secret signs until <RelativeTime iso={c.previous_secret_until} />
        </span>
      )}
    </>
  );
}

/** The test delivery after its first attempt: its status, the receiver's HTTP status, the error, when it is tried again. */
function TestOutcome({ name, delivery: d }: { name: string; delivery: DeliveryView }) {
  return (
    <p className="test-outcome" role="status" aria-label={`Test of ${name}`}>
      Test alert: <DeliveryStatusBadge status={d.status} /> {d.last_http_status === null ? "no HTTP answer" : `HTTP ${d.last_http_status}`}
      {d.last_error !== null && <span className="break"> — {d.last_error}</span>}
      {d.status === "pending" && d.next_attempt_at !== null && (
        <>
          {" "}
          — retrying <RelativeTime iso={d.next_attempt_at} />
        </>
      )}
    </p>
  );
}

function TestRefused({ name, error }: { name: string; error: unknown }) {
  return (
    <p className="form-error" role="alert" aria-label={`Test of ${name}`}>
      Test refused: {errorMessage(error)}
    </p>
  );
}

/** Confirms a new signing secret for `channel`; the answer's secret goes to `onRotated`, shown once. */
function RotateSecretDialog({ channel, onClose, onRotated }: { channel: ChannelView | null; onClose: () => void; onRotated: (c: { name: string; secret: string }) => void }) {
  const rotate = useRotateChannelSecret();
  const close = () => {
    onClose();
    rotate.reset();
  };
  const confirm = () =>
    channel &&
    rotate.mutate(channel, {
      onSuccess: (c) => {
        if (c.secret !== undefined) onRotated({ name: c.name, secret: c.secret });
        close();
      },
    });
  return (
    <ConfirmDialog open={channel !== null} title={`Rotate the signing secret of ${channel?.name ?? ""}?`} confirmLabel="Rotate secret" busy={rotate.isPending} onConfirm={confirm} onCancel={close}>
      <p>The new secret is shown once. For 24 hours every request is signed with both, so the receiver can switch to the new one without missing an alert.</p>
      <FormError error={rotate.error} />
    </ConfirmDialog>
  );
}
