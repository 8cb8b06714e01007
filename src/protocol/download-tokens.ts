import { z } from "zod";

/**
 * Kinds of download token: the spec §2.1 file token kinds (`client_artifact`,
 * `config_bulk_package`, `snapshot_export`) plus the node config download token (`node_config`,
 * spec §2.3). A token is bound to one kind and one resource; presenting it for another answers
 * `DOWNLOAD_TOKEN_SCOPE_MISMATCH` (spec §7). The store's CHECK constraint lists the same values.
 */
export const downloadTokenKindSchema = z.enum(["node_config", "client_artifact", "config_bulk_package", "snapshot_export"]);
export type DownloadTokenKind = z.output<typeof downloadTokenKindSchema>;
