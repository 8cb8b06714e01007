import { useQueryClient } from "@tanstack/react-query";
import { createContext, useCallback, useContext, useEffect, useMemo, useState, type ReactNode } from "react";
import { api, onUnauthorized, tokenStore } from "./client.js";

interface AuthState {
  /** The bearer token of this browser's session (shared by its tabs), or null when logged out. */
  token: string | null;
  /** `POST /api/v1/auth/login`; throws ApiError (wrong password: its message). */
  login(username: string, password: string): Promise<void>;
  /** `POST /api/v1/auth/oidc/exchange`: the one-time code of a finished single sign-on becomes the session. */
  loginWithSsoCode(code: string): Promise<void>;
  /** `POST /api/v1/auth/logout` (ends the session and its SSE stream), then forgets the token. */
  logout(): Promise<void>;
}

const AuthContext = createContext<AuthState | null>(null);

/**
 * Holds the admin session, shared by the browser's tabs: a 401 anywhere (REST or SSE) logs out;
 * a login or logout in another tab is followed here (the `storage` event).
 */
export function AuthProvider({ children }: { children: ReactNode }) {
  const queryClient = useQueryClient();
  const [token, setToken] = useState<string | null>(() => tokenStore.get());

  useEffect(() => {
    onUnauthorized(() => {
      setToken(null);
      queryClient.clear();
    });
    return () => onUnauthorized(() => undefined);
  }, [queryClient]);

  // Another tab logged in or out: follow it (a logout there ends this tab's view too).
  useEffect(
    () =>
      tokenStore.subscribe((next) => {
        setToken(next);
        if (next === null) queryClient.clear();
      }),
    [queryClient],
  );

  const login = useCallback(async (username: string, password: string) => {
    const answer = await api.login({ body: { username, password } });
    tokenStore.set(answer.access_token, answer.expires_in);
    setToken(answer.access_token);
  }, []);

  const loginWithSsoCode = useCallback(async (code: string) => {
    const answer = await api.exchangeOidcCode({ body: { code } });
    tokenStore.set(answer.access_token, answer.expires_in);
    setToken(answer.access_token);
  }, []);

  const logout = useCallback(async () => {
    try {
      await api.logout();
    } catch {
      // already ended: forgetting the token is all that is left
    }
    tokenStore.clear();
    setToken(null);
    queryClient.clear();
  }, [queryClient]);

  const value = useMemo(() => ({ token, login, loginWithSsoCode, logout }), [token, login, loginWithSsoCode, logout]);
  return <AuthContext.Provider value={value}>{children}</AuthContext.Provider>;
}

/** The admin session (shared by the browser's tabs). */
export function useAuth(): AuthState {
  const ctx = useContext(AuthContext);
  if (ctx === null) throw new Error("useAuth outside <AuthProvider>");
  return ctx;
}
