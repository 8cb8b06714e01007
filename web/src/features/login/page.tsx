import { useState, type FormEvent } from "react";
import { Navigate, useLocation } from "react-router";
import { useAuth } from "../../api/auth.js";
import { errorMessage } from "../../api/client.js";
import { usePageTitle } from "../../page-title.js";

/**
 * Sign-in (README "Users, roles and tokens"): username (`admin` until changed) and password are
 * exchanged for a bearer token kept for the browser's tabs.
 */
export function LoginPage() {
  usePageTitle("Sign in");
  const { token, login } = useAuth();
  const location = useLocation();
  const [username, setUsername] = useState("admin");
  const [password, setPassword] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const next = new URLSearchParams(location.search).get("next");
  const target = next !== null && next.startsWith("/") && !next.startsWith("//") ? next : "/";

  if (token !== null) return <Navigate to={target} replace />;

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
      </form>
    </main>
  );
}
