import { useEffect, useState, type FormEvent } from "react";
import { useGate } from "../../api/roles.js";
import type { MqttSettingsView } from "../../api/types.js";
import { ConfirmDialog } from "../../components/confirm-dialog.js";
import { QueryView } from "../../components/states.js";
import { usePageTitle } from "../../page-title.js";
import { useSystemStatus } from "../system/queries.js";
import { useSaveMqttSettings } from "./mutations.js";
import { PublicUrlSection } from "./public-url.js";
import { useMqttSettings } from "./queries.js";
import { FormError } from "../../components/form-error.js";

/**
 * Settings: the public URL hosts are told (`GET/PUT /api/v1/settings/server`), MQTT settings
 * (`GET/PUT /api/v1/settings/mqtt`, DESIGN §5) and the server version.
 * With MQTT services off (spec §1.7 bullet 7) the form stays, its controls disabled with the reason.
 */
export function SettingsPage() {
  usePageTitle("Settings");
  const query = useMqttSettings();
  const status = useSystemStatus();
  return (
    <section className="narrow" aria-labelledby="settings-title">
      <h1 id="settings-title">Settings</h1>
      <PublicUrlSection />
      <QueryView query={query}>{(mqtt) => <MqttForm mqtt={mqtt} />}</QueryView>
      <section className="card" aria-labelledby="version-title">
        <h2 id="version-title">Version</h2>
        <dl className="facts">
          <div>
            <dt>Server version</dt>
            <dd>{status.data?.update.version ?? "…"}</dd>
          </div>
          <div>
            <dt>Client releases</dt>
            <dd className="mono break">{status.data?.update.release_download_url ?? "…"}</dd>
          </div>
        </dl>
        <p className="muted small">
          Client downloads of the release source are built from this address (SVC_RELEASE_DOWNLOAD_URL) and the server
          version: <span className="mono break">{"{address}/v{version}/{file}"}</span>.
        </p>
      </section>
    </section>
  );
}

const DISABLED_REASON = "MQTT services are disabled (SVC_ENABLE_MQTT_SERVICES=false), so these settings cannot be changed.";

function MqttForm({ mqtt }: { mqtt: MqttSettingsView }) {
  const { draft, edit, saved, save, submit, reset } = useMqttForm(mqtt);
  const [confirmReset, setConfirmReset] = useState(false);
  const disabled = !mqtt.mqtt_enabled;
  const gate = useGate("updateMqttSettings");
  const reasonProps = disabled ? { title: DISABLED_REASON, "aria-describedby": "mqtt-disabled-reason" } : {};

  return (
    <form className="card form" onSubmit={submit} aria-labelledby="mqtt-title">
      <h2 id="mqtt-title">MQTT</h2>
      <MqttFacts mqtt={mqtt} />
      {disabled && (
        <p id="mqtt-disabled-reason" className="notice">
          {DISABLED_REASON}
        </p>
      )}
      <p className="muted">What bind profiles tell agents to connect to. A field set here wins over the environment.</p>
      <fieldset disabled={disabled || gate.disabled || save.isPending}>
        <legend className="visually-hidden">Public broker address</legend>
        <MqttFields mqtt={mqtt} draft={draft} edit={edit} reasonProps={reasonProps} />
        <div className="form-actions">
          <button type="submit" className="primary" {...gate.props} {...reasonProps}>
            Save MQTT settings
          </button>
          <button type="button" onClick={() => setConfirmReset(true)} {...gate.props} {...reasonProps}>
            Use environment values
          </button>
          {gate.reason}
        </div>
      </fieldset>
      <FormError error={save.error} />
      <ConfirmDialog
        open={confirmReset}
        title="Use the environment's values?"
        confirmLabel="Use environment values"
        onConfirm={() => {
          setConfirmReset(false);
          reset();
        }}
        onCancel={() => setConfirmReset(false)}
      >
        <p>
          The public host and ports set here are removed; bind profiles issued from now on carry the values of
          SVC_MQTT_PUBLIC_HOST, SVC_MQTT_PUBLIC_PORT and SVC_MQTT_PUBLIC_TLS_PORT. Agents already bound keep theirs.
        </p>
      </ConfirmDialog>
      {saved && !save.isPending && (
        <p className="form-ok" role="status">
          Saved.
        </p>
      )}
    </form>
  );
}

/** The public broker address as typed (ports as text). */
interface MqttDraft {
  host: string;
  port: string;
  tlsPort: string;
}

/**
 * The MQTT form's state and its two writes: `submit` saves the typed values, `reset` clears them
 * so the environment's apply again. `saved` says the last write succeeded.
 */
function useMqttForm(mqtt: MqttSettingsView) {
  const [draft, setDraft] = useState<MqttDraft>(() => draftOf(mqtt));
  const [saved, setSaved] = useState(false);
  // Another tab (or the API) changed them: show the new values.
  useEffect(() => {
    setDraft({ host: mqtt.public_host, port: String(mqtt.public_port), tlsPort: String(mqtt.public_tls_port) });
  }, [mqtt.public_host, mqtt.public_port, mqtt.public_tls_port]);
  const edit = (patch: Partial<MqttDraft>) => setDraft((d) => ({ ...d, ...patch }));
  const save = useSaveMqttSettings();
  const onSaved = { onSuccess: () => setSaved(true) };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    setSaved(false);
    save.mutate({ public_host: draft.host.trim(), public_port: Number(draft.port), public_tls_port: Number(draft.tlsPort) }, onSaved);
  };
  const reset = () => {
    setSaved(false);
    save.mutate({ public_host: null, public_port: null, public_tls_port: null }, onSaved);
  };
  return { draft, edit, saved, save, submit, reset };
}

function draftOf(mqtt: MqttSettingsView): MqttDraft {
  return { host: mqtt.public_host, port: String(mqtt.public_port), tlsPort: String(mqtt.public_tls_port) };
}

/** MQTT services on or off, the broker (and whether it is connected), TLS. */
function MqttFacts({ mqtt }: { mqtt: MqttSettingsView }) {
  return (
    <dl className="facts">
      <div>
        <dt>MQTT services</dt>
        <dd>{mqtt.mqtt_enabled ? "enabled" : "disabled"}</dd>
      </div>
      <div>
        <dt>Broker</dt>
        <dd>
          {mqtt.broker} {mqtt.mqtt_enabled && `(${mqtt.broker_connected ? "connected" : "disconnected"})`}
        </dd>
      </div>
      <div>
        <dt>TLS</dt>
        <dd>{mqtt.tls_enabled ? "on" : "off"}</dd>
      </div>
    </dl>
  );
}

/** Public host, port and TLS port, each labelled with where its current value comes from. */
function MqttFields({ mqtt, draft, edit, reasonProps }: {
  mqtt: MqttSettingsView;
  draft: MqttDraft;
  edit: (patch: Partial<MqttDraft>) => void;
  /** The disabled reason as title and description, while MQTT services are off. */
  reasonProps: { title?: string; "aria-describedby"?: string };
}) {
  return (
    <>
      <label htmlFor="public_host">
        Public host <span className="source">({mqtt.sources.public_host})</span>
      </label>
      <input id="public_host" value={draft.host} onChange={(e) => edit({ host: e.target.value })} required {...reasonProps} />
      <label htmlFor="public_port">
        Public port <span className="source">({mqtt.sources.public_port})</span>
      </label>
      <input id="public_port" type="number" min={1} max={65535} value={draft.port} onChange={(e) => edit({ port: e.target.value })} required {...reasonProps} />
      <label htmlFor="public_tls_port">
        Public TLS port <span className="source">({mqtt.sources.public_tls_port})</span>
      </label>
      <input id="public_tls_port" type="number" min={1} max={65535} value={draft.tlsPort} onChange={(e) => edit({ tlsPort: e.target.value })} required {...reasonProps} />
    </>
  );
}
