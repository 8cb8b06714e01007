// @ts-check
import { functionRanges } from "./scripts/mutation-scope.mjs";

/**
 * Mutation testing (issue 10, "Measure test strength"): `npm run mutation`. Not part of `npm test`.
 * Scope, focused test files and how to read the result: docs/mutation.md.
 * @type {import('@stryker-mutator/api/core').PartialStrykerOptions}
 */
export default {
  testRunner: "tap",
  plugins: ["@stryker-mutator/tap-runner"],
  // Each test file is one "test" for the tap runner; perTest coverage then runs, for a mutant,
  // only the test files whose run reached it.
  coverageAnalysis: "perTest",
  mutate: [
    "src/machines/**/*.ts",
    "src/mqtt/router.ts",
    "src/mqtt/authz.policy.ts",
    "src/actors/commands.ts",
    "src/domain/tokens.ts",
    // bindCommand, bind, reset and clearClientCredentials only (issue 10: "the bind/reset code"),
    // and the store functions their queries moved to (issue 11 §2). Stryker takes line ranges;
    // functionRanges finds them by name each time this file is read (docs/mutation.md).
    ...functionRanges("src/services/control.service.ts", ["bindCommand", "bind", "reset", "clearClientCredentials"]),
    "src/store/bind-tokens.repository.ts",
    ...functionRanges("src/store/broker-credentials.repository.ts", ["putBrokerCredential", "deleteBrokerCredential", "deleteBrokerCredentialsOfNode"]),
    ...functionRanges("src/store/node-client-state.repository.ts", ["recordClientBound", "clearClientState"]),
    ...functionRanges("src/store/nodes.repository.ts", ["getNodeById"]),
  ],
  tap: {
    // Literal paths, fastest first: a static mutant (evaluated at import, e.g. the machine's
    // config object) runs every file until one fails, so the unit tests come before the two
    // integration files that start the real service with its embedded broker. Other files that
    // also reach these modules (auth, downloads, internal-authz routes, feature switch,
    // broker-down) are left out to keep a run under an hour on 2 cores: each surviving mutant
    // runs every file that reached it. docs/mutation.md lists what each file covers.
    testFiles: [
      "test/machines/node.machine.test.ts",
      "test/machines/node.machine.mutants.test.ts",
      "test/machines/sync-derivation.props.test.ts",
      "test/machines/machines-docs.test.ts",
      "test/mqtt/authz.policy.test.ts",
      "test/mqtt/authz.policy.props.test.ts",
      "test/domain/tokens.test.ts",
      "test/mqtt/router.mutants.test.ts",
      "test/actors/commands.mutants.test.ts",
      "test/control/bind-reset.mutants.test.ts",
      "test/control/control-channel.test.ts",
      "test/control/lifecycle.test.ts",
      // The command path's failures (refused publishes, automatic pushes that cannot be sent) and
      // push targets across a restart (the command tracker's start()).
      "test/control/failures.test.ts",
      "test/control/restart-push.test.ts",
      // Last: only mutants every file above let through reach it. It binds with TLS on (the
      // profile's ca_cert branch of the bind code) and generates its certificates per test.
      "test/mqtt/tls.test.ts",
    ],
    nodeArgs: ["--import", "tsx", "--test-reporter=tap"],
    forceBail: true,
  },
  // The checker would typecheck every mutant (minutes each on 2 cores); tsc runs in CI instead.
  checkers: [],
  concurrency: 1,
  // Integration tests start a broker and SQLite per file: give slow files room before "timeout".
  timeoutMS: 30000,
  timeoutFactor: 2,
  reporters: ["clear-text", "progress", "html", "json"],
  htmlReporter: { fileName: "reports/mutation/mutation.html" },
  jsonReporter: { fileName: "reports/mutation/mutation.json" },
  clearTextReporter: { allowColor: false, logTests: false, showTestFiles: false, reportMutants: true },
  thresholds: { high: 85, low: 70, break: null },
  ignorePatterns: ["data", "reports", "deploy", ".tmp", "*.log"],
  tempDirName: ".stryker-tmp",
  cleanTempDir: true,
};
