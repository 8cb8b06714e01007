import { useEffect, useId, useState } from "react";
import { nameSchema } from "../../../../src/protocol/fields.js";
import { APPLY_MODES } from "../../../../src/protocol/enums.js";
import type { ApplyMode, ConfigView } from "../../api/types.js";
import { ConfirmDialog } from "../../components/confirm-dialog.js";
import { FormError, invalidProps } from "../../components/form-error.js";
import { useUpdateConfig } from "./mutations.js";

/** What each apply mode does to a host whose tunnel runs, in one line (docs/decisions.md "Hitless peer updates"). */
export const APPLY_MODE_WHY: Readonly<Record<ApplyMode, string>> = {
  restart: "Spec behaviour: the host stops, rewrites and restarts its interface, briefly dropping every tunnel.",
  hitless: "Peers change on the running interface; other tunnels stay up (an [Interface] change still restarts).",
};

/** The select's option text of each mode. */
const APPLY_MODE_OPTION: Readonly<Record<ApplyMode, string>> = { restart: "restart (spec default)", hitless: "hitless" };

/**
 * "Apply pushes": the apply mode's select, described by the chosen mode's one-line why
 * ({@link ApplyModeWhy} with the same `whyId`, placed where the form has room for a line).
 */
export function ApplyModeSelect({ value, onChange, whyId }: { value: ApplyMode; onChange: (mode: ApplyMode) => void; whyId: string }) {
  const id = useId();
  return (
    <div>
      <label htmlFor={id}>Apply pushes</label>
      <select id={id} value={value} aria-describedby={whyId} onChange={(e) => onChange(e.target.value as ApplyMode)}>
        {APPLY_MODES.map((mode) => (
          <option key={mode} value={mode}>
            {APPLY_MODE_OPTION[mode]}
          </option>
        ))}
      </select>
    </div>
  );
}

/** The one-line why of `mode` (see {@link ApplyModeSelect}). */
export function ApplyModeWhy({ mode, id, className = "" }: { mode: ApplyMode; id: string; className?: string }) {
  return (
    <p className={`muted small ${className}`.trim()} id={id}>
      {APPLY_MODE_WHY[mode]}
    </p>
  );
}

/** The edit form's labels by wire field: how an error names the field. */
const EDIT_LABELS = { name: "Config name", apply_mode: "Apply pushes" } as const;

/**
 * Edit a config (open while `config` is set): its name and how pushes are applied on running
 * hosts (`PATCH /api/v1/configs/{id}` with what changed). The API's error stays in the dialog.
 */
export function EditConfigDialog({ config, onClose }: { config: ConfigView | null; onClose: () => void }) {
  const update = useUpdateConfig();
  const [name, setName] = useState("");
  const [mode, setMode] = useState<ApplyMode>("restart");
  useEffect(() => {
    if (config === null) return;
    setName(config.name);
    setMode(config.apply_mode);
  }, [config]);
  const close = () => {
    update.reset();
    onClose();
  };
  const save = () => {
    if (config === null) return;
    const body = { ...(name.trim() !== config.name ? { name: name.trim() } : {}), ...(mode !== config.apply_mode ? { apply_mode: mode } : {}) };
    if (Object.keys(body).length === 0) return close();
    update.mutate({ configId: config.config_id, body }, { onSuccess: close });
  };
  const nameId = useId();
  const whyId = useId();
  return (
    <ConfirmDialog open={config !== null} title={`Edit config ${config?.name ?? ""}`} confirmLabel="Save config" busy={update.isPending} onConfirm={save} onCancel={close}>
      <div>
        <label htmlFor={nameId}>Config name</label>
        <input id={nameId} value={name} maxLength={nameSchema.maxLength ?? undefined} onChange={(e) => setName(e.target.value)} required {...invalidProps(update.error, EDIT_LABELS, "name", "edit-config-error")} />
      </div>
      <ApplyModeSelect value={mode} onChange={setMode} whyId={whyId} />
      <ApplyModeWhy mode={mode} id={whyId} />
      <FormError error={update.error} labels={EDIT_LABELS} id="edit-config-error" />
    </ConfirmDialog>
  );
}
