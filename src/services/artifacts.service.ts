import { createHash } from "node:crypto";
import { createReadStream, existsSync, type ReadStream } from "node:fs";
import { mkdir, readdir, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import type { Clock } from "../lib/clock.js";
import type { Settings } from "../config.js";
import {
  artifactFilename,
  artifactId,
  describeTargets,
  downloadCommand,
  findTarget,
  releaseTag,
  supportedTargets,
} from "../domain/artifact-name.js";
import { AppError, isAppError } from "../errors.js";
import { writeFileAtomic } from "../lib/atomic-write.js";
import type { Logger } from "../logger.js";
import type { Store } from "../store/db.js";
import type { ClientTarget } from "../protocol/client-targets.js";
import { VERSION } from "../lib/version.js";
import { buildClientZip, CLIENT_ENTRY } from "./client-bundle.js";
import type { DownloadsService } from "./downloads.service.js";

export interface ArtifactsServiceDeps {
  settings: Settings;
  store: Store;
  clock: Clock;
  log: Logger;
  downloads: DownloadsService;
  /** `{base_url}` now (src/services/public-url.service.ts): download commands start with it. */
  publicUrl: () => string;
}

/** How long one release host request may take. */
export const RELEASE_LOOKUP_TIMEOUT_MS = 10_000;

/** `remote_release`: the asset on the release host (spec §4 rule 2). */
export interface RemoteArtifact {
  source: "remote_release";
  filename: string;
  /** The release tag looked up: `v{version}`. */
  tag: string;
  /** The asset's `browser_download_url`; the browser downloads from there directly. */
  download_url: string;
  /** spec §4 rule 5: `curl -fL -o <file> <url> && unzip -oq <file> -d svc-client`. */
  command: string;
}

/** `local_build`: a zip in `{dataDir}/artifacts/` (spec §4 rule 4). */
export interface LocalArtifact {
  source: "local_build";
  artifact_id: string;
  filename: string;
  size_bytes: number;
  sha256: string;
  /** Absolute path of the zip on this server (not answered). */
  path: string;
}

/** A download grant of a local build (spec §4 rule 6; DESIGN §5 download answer). */
export interface ArtifactGrant {
  artifact_id: string;
  filename: string;
  size_bytes: number;
  sha256: string;
  /** `/api/v1/tools/download/client-artifacts/{artifact_id}?download_token=...` */
  download_path: string;
  download_token: string;
  /** ms since the epoch */
  download_token_expires_at: number;
  /** spec §4 rule 6: curl of `{base_url}{download_path}` (only the file token), then unzip. */
  command: string;
}

/** The path of a client artifact download, without the token. */
export function clientArtifactPath(id: string): string {
  return `/api/v1/tools/download/client-artifacts/${id}`;
}

/** What a GitHub REST release answers (only the fields we read; the rest is ignored). */
const releaseSchema = z.object({
  tag_name: z.string(),
  assets: z.array(z.object({ name: z.string(), browser_download_url: z.string() })),
});

const httpUrl = z.url({ protocol: /^https?$/ });

interface CachedDigest {
  mtimeMs: number;
  size: number;
  sha256: string;
}

/**
 * Client artifacts (spec §2.2, §4 rules 2–7).
 *
 * - `remote_release` asks the release host (GitHub REST shape, `SVC_RELEASE_API_URL`) for the
 *   release tagged `v{version}` of the server's version and its asset
 *   `svc-client-{goos}-{goarch}-v{version}.zip`. Nothing is cached; a missing tag or asset is
 *   RELEASE_NOT_FOUND and no other version is ever offered (rule 3).
 * - `local_build` bundles the client from this source tree ({@link buildClientZip}) into
 *   `{dataDir}/artifacts/{filename}`, once per version/goos/goarch: a missing file is rebuilt,
 *   and concurrent requests for one artifact share one build.
 */
export class ArtifactsService {
  readonly #settings: Settings;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #downloads: DownloadsService;
  readonly #publicUrl: () => string;
  /** Builds (and cache look-ups) under way, by artifact id: one at a time per artifact. */
  readonly #pending = new Map<string, Promise<LocalArtifact>>();
  /** SHA-256 of zips already hashed, by path; valid while mtime and size are unchanged. */
  readonly #digests = new Map<string, CachedDigest>();

  constructor(readonly deps: ArtifactsServiceDeps) {
    this.#settings = deps.settings;
    this.#clock = deps.clock;
    this.#log = deps.log.child({ name: "artifacts" });
    this.#downloads = deps.downloads;
    this.#publicUrl = deps.publicUrl;
  }

  /** The server's version, which names every artifact (spec §9 rule 2). */
  get version(): string {
    return VERSION;
  }

  /** Where local builds are kept. */
  get artifactsDir(): string {
    return join(this.#settings.dataDir, "artifacts");
  }

  /**
   * The supported target of a goos/goarch pair.
   * @throws AppError VALIDATION_FAILED for any pair outside the fixed list
   */
  target(goos: string, goarch: string): ClientTarget {
    const t = findTarget(goos, goarch);
    if (t === undefined) {
      throw new AppError("VALIDATION_FAILED", `${goos}/${goarch} is not a supported client target; supported: ${describeTargets()}`, {
        goos,
        goarch,
      });
    }
    return t;
  }

  /**
   * spec §4 rules 2, 3, 5: the release asset of the current version on the release host.
   * @throws AppError VALIDATION_FAILED (unsupported target), RELEASE_NOT_FOUND (no release
   *   tagged `v{version}`, or no asset of that name), SERVICE_UNAVAILABLE (host unreachable,
   *   timing out, failing, or answering something that is not a release)
   */
  async remoteRelease(goos: string, goarch: string): Promise<RemoteArtifact> {
    const target = this.target(goos, goarch);
    const tag = releaseTag(VERSION);
    const filename = artifactFilename(target, VERSION);
    const url = `${this.#settings.releaseApiUrl}/releases/tags/${encodeURIComponent(tag)}`;
    const res = await this.#fetchRelease(url);
    const missing = (what: string) =>
      new AppError("RELEASE_NOT_FOUND", `${what}; no other version is offered (spec §4 rule 3)`, { tag, asset: filename });
    if (res.status === 404) throw missing(`the release host has no release tagged ${tag}`);
    if (res.status !== 200) {
      this.#log.warn({ status: res.status, url }, "release host refused the lookup");
      throw new AppError("SERVICE_UNAVAILABLE", `the release host answered HTTP ${res.status}; retry later`);
    }
    let body: unknown;
    try {
      body = JSON.parse(res.text);
    } catch {
      body = undefined;
    }
    const release = releaseSchema.safeParse(body);
    if (!release.success) {
      this.#log.warn({ url }, "release host answered something that is not a release");
      throw new AppError("SERVICE_UNAVAILABLE", "the release host answered something that is not a release; retry later");
    }
    if (release.data.tag_name !== tag) throw missing(`the release host has no release tagged ${tag}`);
    const asset = release.data.assets.find((a) => a.name === filename);
    if (asset === undefined) throw missing(`release ${tag} has no asset ${filename}`);
    if (!httpUrl.safeParse(asset.browser_download_url).success) {
      throw new AppError("SERVICE_UNAVAILABLE", `the release host gave asset ${filename} an unusable download URL`);
    }
    return {
      source: "remote_release",
      filename,
      tag,
      download_url: asset.browser_download_url,
      command: downloadCommand(filename, asset.browser_download_url),
    };
  }

  /**
   * One GET of the release host with a timeout; a network failure or a 5xx is tried once more.
   * @throws AppError SERVICE_UNAVAILABLE when no answer arrives
   */
  async #fetchRelease(url: string): Promise<{ status: number; text: string }> {
    let lastError: unknown;
    for (let attempt = 1; attempt <= 2; attempt++) {
      try {
        const res = await fetch(url, {
          headers: {
            accept: "application/vnd.github+json",
            "x-github-api-version": "2022-11-28",
            "user-agent": `svc-mesh-control/${VERSION}`,
          },
          redirect: "follow",
          signal: AbortSignal.timeout(RELEASE_LOOKUP_TIMEOUT_MS),
        });
        const text = await res.text();
        if (res.status >= 500 && attempt === 1) {
          lastError = new Error(`HTTP ${res.status}`);
          continue;
        }
        return { status: res.status, text };
      } catch (err) {
        lastError = err;
        // A timeout already took RELEASE_LOOKUP_TIMEOUT_MS: do not double the wait.
        if (err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError")) break;
      }
    }
    this.#log.warn({ err: lastError, url }, "release host unreachable");
    const timedOut = lastError instanceof Error && (lastError.name === "TimeoutError" || lastError.name === "AbortError");
    throw new AppError(
      "SERVICE_UNAVAILABLE",
      timedOut
        ? `the release host did not answer within ${RELEASE_LOOKUP_TIMEOUT_MS / 1000} s; retry later`
        : "the release host is unreachable; retry later",
    );
  }

  /**
   * spec §4 rule 4: the local build of a target, built now unless already in the cache.
   * @throws AppError VALIDATION_FAILED (unsupported target), SERVICE_UNAVAILABLE (no client
   *   source tree on this server), INTERNAL (the bundle failed to build; logged)
   */
  async localBuild(goos: string, goarch: string): Promise<LocalArtifact> {
    return this.#ensure(this.target(goos, goarch));
  }

  /**
   * The local build behind an `artifact_id` of the current version, rebuilt when its file is gone.
   * @throws AppError NOT_FOUND for an id that is no supported target of the current version
   */
  async artifact(id: string): Promise<LocalArtifact> {
    const target = supportedTargets().find((t) => artifactId(t, VERSION) === id);
    if (target === undefined) {
      throw new AppError("NOT_FOUND", `no client artifact ${id} for the current version ${VERSION}`);
    }
    return this.#ensure(target);
  }

  /** A read stream of an artifact's zip. */
  open(artifact: LocalArtifact): ReadStream {
    return createReadStream(artifact.path);
  }

  /**
   * spec §4 rule 6: creates or locates the local build and issues a 5-minute `client_artifact`
   * token bound to its `artifact_id`.
   * @throws like {@link localBuild}
   */
  async grant(goos: string, goarch: string): Promise<ArtifactGrant> {
    const artifact = await this.localBuild(goos, goarch);
    const issued = await this.#downloads.issue("client_artifact", artifact.artifact_id);
    const downloadPath = `${clientArtifactPath(artifact.artifact_id)}?download_token=${encodeURIComponent(issued.token)}`;
    return {
      artifact_id: artifact.artifact_id,
      filename: artifact.filename,
      size_bytes: artifact.size_bytes,
      sha256: artifact.sha256,
      download_path: downloadPath,
      download_token: issued.token,
      download_token_expires_at: issued.expiresAt,
      command: downloadCommand(artifact.filename, `${this.#publicUrl()}${downloadPath}`),
    };
  }

  /** One look-up-or-build at a time per artifact; later callers share the running one. */
  #ensure(target: ClientTarget): Promise<LocalArtifact> {
    const id = artifactId(target, VERSION);
    const running = this.#pending.get(id);
    if (running) return running;
    const job = this.#lookupOrBuild(id, target).finally(() => this.#pending.delete(id));
    this.#pending.set(id, job);
    return job;
  }

  async #lookupOrBuild(id: string, target: ClientTarget): Promise<LocalArtifact> {
    const filename = artifactFilename(target, VERSION);
    const path = join(this.artifactsDir, filename);
    const cached = await this.#describe(id, filename, path);
    if (cached) return cached;
    await this.#build(target, path);
    const built = await this.#describe(id, filename, path);
    if (!built) throw new Error(`the built artifact ${path} disappeared`);
    return built;
  }

  /** Size and SHA-256 of the zip at `path`, or undefined when there is none. */
  async #describe(id: string, filename: string, path: string): Promise<LocalArtifact | undefined> {
    let st;
    try {
      st = await stat(path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw err;
    }
    if (!st.isFile()) return undefined;
    let digest = this.#digests.get(path);
    if (!digest || digest.mtimeMs !== st.mtimeMs || digest.size !== st.size) {
      digest = { mtimeMs: st.mtimeMs, size: st.size, sha256: await sha256File(path) };
      this.#digests.set(path, digest);
    }
    return { source: "local_build", artifact_id: id, filename, size_bytes: st.size, sha256: digest.sha256, path };
  }

  /** Bundles and zips `target`, then moves the zip into place atomically. */
  async #build(target: ClientTarget, path: string): Promise<void> {
    if (!existsSync(CLIENT_ENTRY)) {
      throw new AppError("SERVICE_UNAVAILABLE", "local_build needs the client source tree (src/cli/svcctl.ts), which this server does not have");
    }
    const started = performance.now();
    let zip;
    try {
      zip = await buildClientZip({ target, version: VERSION, mtime: new Date(this.#clock.now()) });
    } catch (err) {
      if (isAppError(err)) throw err;
      this.#log.error({ err, goos: target.goos, goarch: target.goarch }, "client bundle build failed");
      throw new AppError("INTERNAL", "building the client artifact failed; the server log has the details");
    }
    for (const warning of zip.warnings) this.#log.warn({ warning }, "client bundle warning");
    await mkdir(this.artifactsDir, { recursive: true });
    await this.#prune(zip.filename);
    // 0644: the client zip holds no secret.
    await writeFileAtomic(path, zip.zip, { mode: 0o644 });
    this.#log.info(
      { file: zip.filename, bytes: zip.zip.length, ms: Math.round(performance.now() - started), goos: target.goos, goarch: target.goarch },
      "client artifact built",
    );
  }

  /**
   * Removes what no request can reach any more: zips of other server versions (only the current
   * version is ever served, spec §9 rule 2) and temp files an interrupted build of `filename`
   * left behind (builds of one artifact never overlap, see {@link #ensure}).
   */
  async #prune(filename: string): Promise<void> {
    const suffix = `-v${VERSION}.zip`;
    for (const name of await readdir(this.artifactsDir)) {
      const oldVersion = name.startsWith("svc-client-") && name.endsWith(".zip") && !name.endsWith(suffix);
      const leftover = name.startsWith(`.${filename}.`) && name.endsWith(".tmp");
      if (!oldVersion && !leftover) continue;
      await rm(join(this.artifactsDir, name), { force: true });
      this.#digests.delete(join(this.artifactsDir, name));
      this.#log.info({ file: name }, "stale client artifact removed");
    }
  }
}

async function sha256File(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}
