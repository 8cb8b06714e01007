import { useQuery } from "@tanstack/react-query";
import { useEffect, useRef, useState, type FormEvent } from "react";
import { Navigate, useLocation } from "react-router";
import { SSO_FAILURES, ssoFailureReasonSchema } from "../../../../src/protocol/oidc.schema.js";
import { useAuth } from "../../api/auth.js";
import { api, errorMessage } from "../../api/client.js";
import { keys } from "../../api/keys.js";
import { usePageTitle } from "../../page-title.js";

/** Where the page to open after a single sign-on is kept while the browser is at the provider. */
const SSO_NEXT_KEY = "svc.sso.next";

/** A path of this console (never another site). */
function localPath(path: string | null): string | null {
  return path !== null && path.startsWith("/") && !path.startsWith("//") ? path : null;
}

/**
 * The outcome of a single sign-on the server put in the URL fragment (`#sso_code=…`, exchanged
 * for the session once; or `#sso_error=reason`, shown), removed from the address bar at once.
 * @returns the failure's sentence, or null
 */
function useSsoReturn(): string | null {
  const { loginWithSsoCode } = useAuth();
  const [error, setError] = useState<string | null>(null);
  const handled = useRef(false);
  useEffect(() => {
    if (handled.current) return;
    handled.current = true;
    const fragment = new URLSearchParams(window.location.hash.slice(1));
    const code = fragment.get("sso_code");
    const failure = fragment.get("sso_error");
    if (code === null && failure === null) return;
    window.history.replaceState(window.history.state, "", window.location.pathname + window.location.search);
    if (failure !== null) setError(SSO_FAILURES[ssoFailureReasonSchema.catch("internal").parse(failure)]);
    if (code !== null) loginWithSsoCode(code).catch((err: unknown) => setError(`Single sign-on failed: ${errorMessage(err)}`));
  }, [loginWithSsoCode]);
  return error;
}

/** Where to go once signed in; the page kept for a single sign-on is used once. */
function signedInTarget(target: string): string {
  sessionStorage.removeItem(SSO_NEXT_KEY);
  return target;
}

/**
 * Sign-in (README "Users, roles and tokens", "Single sign-on (OIDC)"): username (`admin` until
 * changed) and password are exchanged for a bearer token kept for the browser's tabs; when the
 * server has an OpenID provider, "Sign in with …" goes through it and comes back here.
 */
export function LoginPage() {
  usePageTitle("Sign in");
  const { token, login } = useAuth();
  const location = useLocation();
  const [username, setUsername] = useState("admin");
  const [password, setPassword] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const target = localPath(new URLSearchParams(location.search).get("next")) ?? localPath(sessionStorage.getItem(SSO_NEXT_KEY)) ?? "/";

  if (token !== null) return <Navigate to={signedInTarget(target)} replace />;


  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await login(username.trim(), password);
    } catch (err) {
      setError(errorMessage(err));
      setBusy(false);
    }
  };

  return (
    <main className="login">
      <form className="card login-card" onSubmit={(e) => void submit(e)} aria-labelledby="login-title">
        <h1 id="login-title">Mesh control</h1>
        <p className="muted">Sign in with your username and password.</p>
        <label htmlFor="username">Username</label>
        <input id="username" name="username" autoComplete="username" required value={username} onChange={(e) => setUsername(e.target.value)} />
        <label htmlFor="password">Password</label>
        <input
          id="password"
          name="password"
          type="password"
          autoComplete="current-password"
          required
          autoFocus
          value={password}
          onChange={(e) => setPassword(e.target.value)}
          aria-invalid={error !== null}
          aria-describedby={error !== null ? "login-error" : undefined}
        />
        {error !== null && (
          <p id="login-error" className="form-error" role="alert">
            {error}
          </p>
        )}
        <button type="submit" className="primary" disabled={busy || password === "" || username.trim() === ""}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
        <SsoSignIn target={target} />
      </form>
    </main>
  );
}

/**
 * "Sign in with …" when the server has an OpenID provider (nothing otherwise), and why the last
 * single sign-on failed.
 * @param target the console page to open once signed in
 */
function SsoSignIn({ target }: { target: string }) {
  const ssoError = useSsoReturn();
  const methods = useQuery({ queryKey: keys.authMethods, queryFn: ({ signal }) => api.getAuthMethods({ signal }), staleTime: Infinity });
  const sso = methods.data?.sso;
  const startSso = () => {
    sessionStorage.setItem(SSO_NEXT_KEY, target);
    window.location.assign("/api/v1/auth/oidc/start");
  };
  return (
    <>
      {sso?.enabled === true && (
        <div className="login-sso">
          <p className="muted">or</p>
          <button type="button" onClick={startSso}>
            Sign in with {sso.label ?? "SSO"}
          </button>
        </div>
      )}
      {ssoError !== null && (
        <p id="sso-error" className="form-error" role="alert">
          {ssoError}
        </p>
      )}
    </>
  );
}
