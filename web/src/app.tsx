import { lazy, Suspense, type ReactNode } from "react";
import { MutationCache, QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { BrowserRouter, Navigate, Route, Routes, useLocation } from "react-router";
import { AuthProvider, useAuth } from "./api/auth.js";
import { ApiError } from "./api/client.js";
import { keys } from "./api/keys.js";
import { Loading } from "./components/states.js";
import { AlertsPage } from "./features/alerts/page.js";
import { AuditPage } from "./features/audit/page.js";
import { BackupsPage } from "./features/backups/page.js";
import { ConfigsPage } from "./features/configs/page.js";
import { HomePage } from "./features/home/page.js";
import { LoginPage } from "./features/login/page.js";
import { SettingsPage } from "./features/settings/page.js";
import { TokensPage } from "./features/tokens/page.js";
import { UsersPage } from "./features/users/page.js";
import { Layout } from "./shell/layout.js";
import { NotFoundPage } from "./shell/not-found.js";
import { SseProvider } from "./sse/provider.js";

// The heavy pages (topology, QR codes) load on first visit: their code stays out of the initial
// bundle (initial JavaScript ≤ 250 KB gzip, test/web/bundle.test.ts). Use this pattern for any page or view that
// brings a large library.
const MeshPage = lazy(() => import("./features/mesh/page.js").then((m) => ({ default: m.MeshPage })));
const NodePage = lazy(() => import("./features/node/page.js").then((m) => ({ default: m.NodePage })));

/**
 * REST snapshots are kept until an SSE event says they changed (spec §6.5 rule 7), so no
 * time-based refetching; a failed query is retried twice unless the API refused it (4xx). A
 * write refused with 403 means the role the page knew is out of date (an owner changed it):
 * "who am I" is read again, so every control follows the new role.
 */
export const queryClient: QueryClient = new QueryClient({
  mutationCache: new MutationCache({
    onError: (err) => {
      if (err instanceof ApiError && err.status === 403) void queryClient.invalidateQueries({ queryKey: keys.me });
    },
  }),
  defaultOptions: {
    queries: {
      staleTime: Infinity,
      refetchOnWindowFocus: false,
      retry: (count, err) => !(err instanceof ApiError && err.status >= 400 && err.status < 500) && count < 2,
    },
    mutations: { retry: false },
  },
});

/** Sends a logged-out visitor to /login?next=<where they were going>. */
function RequireAuth({ children }: { children: ReactNode }) {
  const { token } = useAuth();
  const location = useLocation();
  if (token === null) {
    const next = location.pathname + location.search;
    return <Navigate to={next === "/" ? "/login" : `/login?next=${encodeURIComponent(next)}`} replace />;
  }
  return <>{children}</>;
}

/**
 * The routes. Add a page: a feature folder `features/<area>/` with `page.tsx` (and its
 * `queries.tsx`, `mutations.tsx`), a `<Route>` here, a link in `shell/layout.tsx` if it belongs in
 * the main navigation (docs/console.md).
 */
export function App() {
  return (
    <QueryClientProvider client={queryClient}>
      <AuthProvider>
        <SseProvider>
          <BrowserRouter>
            <Routes>
              <Route path="/login" element={<LoginPage />} />
              <Route
                element={
                  <RequireAuth>
                    <Layout />
                  </RequireAuth>
                }
              >
                <Route index element={<HomePage />} />
                <Route path="configs" element={<ConfigsPage />} />
                <Route
                  path="configs/:configId"
                  element={
                    <Suspense fallback={<Loading />}>
                      <MeshPage />
                    </Suspense>
                  }
                />
                <Route
                  path="configs/:configId/nodes/:nodeId"
                  element={
                    <Suspense fallback={<Loading />}>
                      <NodePage />
                    </Suspense>
                  }
                />
                <Route path="backups" element={<BackupsPage />} />
                <Route path="settings" element={<SettingsPage />} />
                <Route path="audit" element={<AuditPage />} />
                <Route path="tokens" element={<TokensPage />} />
                <Route path="users" element={<UsersPage />} />
                <Route path="alerts" element={<AlertsPage />} />
                <Route path="*" element={<NotFoundPage />} />
              </Route>
            </Routes>
          </BrowserRouter>
        </SseProvider>
      </AuthProvider>
    </QueryClientProvider>
  );
}
