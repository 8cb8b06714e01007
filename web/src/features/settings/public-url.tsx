import { useEffect, useState, type FormEvent } from "react";
import { useGate } from "../../api/roles.js";
import type { ServerSettingsView } from "../../api/types.js";
import { QueryView } from "../../components/states.js";
import { useSaveServerSettings } from "./mutations.js";
import { useServerSettings } from "./queries.js";
import { FormError } from "../../components/form-error.js";

const SOURCE_TEXT: Record<ServerSettingsView["source"], string> = {
  environment: "set by SVC_PUBLIC_URL",
  stored: "set here",
  default: "default",
};

/**
 * The public URL hosts are told (`GET, PUT /api/v1/settings/server`): bind commands, bind
 * profiles and client download commands carry it. While SVC_PUBLIC_URL sets it the field is
 * read-only and says so (the environment wins); a loopback URL is flagged in place.
 */
export function PublicUrlSection() {
  const query = useServerSettings();
  return (
    <section className="card" aria-labelledby="public-url-title" id="public-url">
      <h2 id="public-url-title">Public URL</h2>
      <QueryView query={query}>{(server) => <PublicUrlForm server={server} />}</QueryView>
    </section>
  );
}

function PublicUrlForm({ server }: { server: ServerSettingsView }) {
  const { draft, setDraft, save, saved, submit, reset } = usePublicUrlForm(server);
  const fixed = server.source === "environment";
  const gate = useGate("updateServerSettings");
  return (
    <form className="form" onSubmit={submit} aria-describedby="public-url-help">
      <p id="public-url-help" className="muted">
        The address other hosts use to reach this service: bind commands, bind profiles and client download commands carry
        it. Give scheme, host and port only, e.g. https://mesh.example.com or http://192.0.2.10:8080.
      </p>
      {fixed && (
        <p id="public-url-env" className="notice">
          SVC_PUBLIC_URL sets the public URL; it wins over this page. Change that variable and restart the service to change it.
        </p>
      )}
      {server.loopback && (
        <p className="form-error" role="note">
          {server.public_url} is a loopback address: other hosts cannot reach the service through it.
        </p>
      )}
      <fieldset disabled={fixed || gate.disabled || save.isPending}>
        <legend className="visually-hidden">Public URL</legend>
        <label htmlFor="public_url">
          Public URL <span className="source">({SOURCE_TEXT[server.source]})</span>
        </label>
        <input id="public_url" type="url" inputMode="url" className="mono" value={draft} onChange={(e) => setDraft(e.target.value)} required maxLength={2048} />
        <div className="form-actions">
          <button type="submit" className="primary" {...gate.props}>
            Save public URL
          </button>
          {server.source === "stored" && (
            <button type="button" onClick={reset} {...gate.props}>
              Use the default
            </button>
          )}
          {gate.reason}
        </div>
      </fieldset>
      <FormError error={save.error} />
      {saved && !save.isPending && (
        <p className="form-ok" role="status">
          Saved. Bind commands and download commands issued from now on carry {server.public_url}; agents already bound keep
          theirs until they bind again.
        </p>
      )}
    </form>
  );
}

/** The field's text, the write (`submit` stores it, `reset` goes back to the default) and whether the last write succeeded. */
function usePublicUrlForm(server: ServerSettingsView) {
  const [draft, setDraft] = useState(server.public_url);
  const [saved, setSaved] = useState(false);
  // Another tab (or the API) changed it: show the new value.
  useEffect(() => setDraft(server.public_url), [server.public_url]);
  const save = useSaveServerSettings();
  const onSaved = { onSuccess: () => setSaved(true) };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    setSaved(false);
    save.mutate({ public_url: draft.trim() }, onSaved);
  };
  const reset = () => {
    setSaved(false);
    save.mutate({ public_url: null }, onSaved);
  };
  return { draft, setDraft, save, saved, submit, reset };
}
