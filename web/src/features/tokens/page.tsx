import { useState, type FormEvent } from "react";
import { createAccessTokenBody } from "../../../../src/protocol/users.schema.js";
import { ROLES, roleAtLeast } from "../../../../src/protocol/roles.js";
import { useMe } from "../../api/roles.js";
import type { AccessTokenView, Role } from "../../api/types.js";
import { ConfirmDialog } from "../../components/confirm-dialog.js";
import { FormError, invalidProps } from "../../components/form-error.js";
import { RelativeTime } from "../../components/relative-time.js";
import { QueryView } from "../../components/states.js";
import { usePageTitle } from "../../page-title.js";
import { useCreateAccessToken, useRevokeAccessToken } from "./mutations.js";
import { useAccessTokens } from "./queries.js";
import { TableHead } from "../../components/table-head.js";
import { SecretOnce } from "../../components/secret-once.js";

const TOKEN_LABELS = { name: "Name", role: "Role", expires_in_days: "Expires in (days)" } as const;

/**
 * Personal access tokens, for scripts and CI (README "Users, roles and tokens"): the list (yours;
 * an owner sees everyone's, with the user) with last use; create (name, a role at most yours,
 * 1–365 days) shows the secret once, with Copy; revoke with a confirmation. A token cannot make
 * tokens: the form is offered to a password (or single sign-on) session only.
 */
export function TokensPage() {
  usePageTitle("Tokens");
  const query = useAccessTokens();
  const me = useMe().data;
  const [revoking, setRevoking] = useState<AccessTokenView | null>(null);
  return (
    <section aria-labelledby="tokens-title">
      <h1 id="tokens-title">Personal access tokens</h1>
      <p className="muted">
        For scripts and CI: send one as <code>Authorization: Bearer svc_pat_…</code>. It acts with the lower of its role and its user’s current role.
      </p>
      {me !== undefined && (me.via === "token" ? <p className="role-note">An access token cannot create access tokens: sign in with your password to create one.</p> : <CreateTokenForm role={me.user.role} />)}
      <section className="card" aria-labelledby="token-list-title">
        <h2 id="token-list-title">{me?.user.role === "owner" ? "Everyone’s tokens" : "Your tokens"}</h2>
        <QueryView query={query} isEmpty={(d) => d.tokens.length === 0} empty={<p>No tokens yet.</p>} loadingLabel="Loading tokens…">
          {(data) => <TokensTable tokens={data.tokens} showUser={me?.user.role === "owner"} onRevoke={setRevoking} />}
        </QueryView>
      </section>
      <RevokeTokenDialog token={revoking} onClose={() => setRevoking(null)} />
    </section>
  );
}

/** New token: name, role (at most `role`), lifetime in days (1–365); then its secret, once. */
function CreateTokenForm({ role: myRole }: { role: Role }) {
  const [name, setName] = useState("");
  const [role, setRole] = useState<Role>("viewer");
  const [days, setDays] = useState("30");
  const create = useCreateAccessToken();
  const edited = <T,>(set: (v: T) => void) => (v: T) => {
    if (create.isError) create.reset();
    set(v);
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate({ name: name.trim(), role, expires_in_days: Number(days) }, { onSuccess: () => setName("") });
  };
  const invalid = (field: keyof typeof TOKEN_LABELS) => invalidProps(create.error, TOKEN_LABELS, field, "create-token-error");
  if (create.data !== undefined) return <NewTokenSecret name={create.data.name} secret={create.data.token} onDone={() => create.reset()} />;
  return (
    <form className="card form" onSubmit={submit} aria-labelledby="create-token-title">
      <h2 id="create-token-title">New token</h2>
      <div className="form-row">
        <div>
          <label htmlFor="token-name">Name</label>
          <input id="token-name" value={name} maxLength={createAccessTokenBody.shape.name.maxLength ?? undefined} onChange={(e) => edited(setName)(e.target.value)} required {...invalid("name")} />
        </div>
        <div>
          <label htmlFor="token-role">Role</label>
          <select id="token-role" value={role} onChange={(e) => edited(setRole)(e.target.value as Role)} {...invalid("role")}>
            {ROLES.filter((r) => roleAtLeast(myRole, r)).map((r) => (
              <option key={r} value={r}>
                {r}
              </option>
            ))}
          </select>
        </div>
        <div>
          <label htmlFor="token-days">Expires in (days)</label>
          <input id="token-days" type="number" min={1} max={365} step={1} value={days} onChange={(e) => edited(setDays)(e.target.value)} required {...invalid("expires_in_days")} />
        </div>
        <div className="form-row-action">
          <button type="submit" className="primary" data-op="createAccessToken" disabled={create.isPending || name.trim() === ""}>
            Create token
          </button>
        </div>
      </div>
      <p className="muted small">A token’s role is at most yours ({myRole}); it lives 1 to 365 days.</p>
      <FormError error={create.error} labels={TOKEN_LABELS} id="create-token-error" />
    </form>
  );
}

/** The secret of a token just made: shown this once, with Copy; Done forgets it. */
function NewTokenSecret({ name, secret, onDone }: { name: string; secret: string; onDone: () => void }) {
  return (
    <SecretOnce id="token-secret-title" title={`Token “${name}” created`} secret={secret} secretLabel="New token secret" copyLabel="token" onDone={onDone}>
      The service keeps only its hash; a lost token is revoked and replaced.
    </SecretOnce>
  );
}

function TokensTable({ tokens, showUser, onRevoke }: { tokens: AccessTokenView[]; showUser: boolean; onRevoke: (t: AccessTokenView) => void }) {
  return (
    <div className="table-wrap">
      <table className="table stack-table">
        <caption className="visually-hidden">Personal access tokens</caption>
        <TableHead columns={["Name", showUser && "User", "Role", "Created", "Expires", "Last used"]} hidden="Actions" />
        <tbody>
          {tokens.map((t) => (
            <tr key={t.token_id}>
              <th scope="row">{t.name}</th>
              {showUser && <td data-label="User">{t.username}</td>}
              <td data-label="Role">{t.role}</td>
              <td data-label="Created">
                <RelativeTime iso={t.created_at} />
              </td>
              <td data-label="Expires">
                <RelativeTime iso={t.expires_at} />
              </td>
              <td data-label="Last used">{t.last_used_at === null ? <span className="muted">never</span> : <RelativeTime iso={t.last_used_at} />}</td>
              <td className="actions">
                <button type="button" className="danger-outline" data-op="revokeAccessToken" aria-label={`Revoke token ${t.name}`} onClick={() => onRevoke(t)}>
                  Revoke
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** Confirms revoking `token`: scripts using it get 401 from their next request. */
function RevokeTokenDialog({ token, onClose }: { token: AccessTokenView | null; onClose: () => void }) {
  const revoke = useRevokeAccessToken();
  return (
    <ConfirmDialog
      open={token !== null}
      title={`Revoke token ${token?.name ?? ""}?`}
      confirmLabel="Revoke token"
      danger
      busy={revoke.isPending}
      onConfirm={() => token && revoke.mutate(token, { onSuccess: onClose })}
      onCancel={() => {
        onClose();
        revoke.reset();
      }}
    >
      <p>Every script using it gets 401 from its next request, and its open event streams end.</p>
      <FormError error={revoke.error} />
    </ConfirmDialog>
  );
}
