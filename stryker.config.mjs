// @ts-check
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
    // bindCommand, bind, reset and clearClientCredentials only (issue 10: "the bind/reset code").
    "src/services/control.service.ts:84-206",
    "src/services/control.service.ts:333-357",
  ],
  tap: {
    testFiles: [
      "test/domain/tokens.test.ts",
      "test/mqtt/authz.policy.test.ts",
      "test/mqtt/authz.policy.props.test.ts",
      "test/machines/*.test.ts",
      "test/control/*.test.ts",
      "test/mqtt/router.mutants.test.ts",
      "test/mqtt/internal-authz.routes.test.ts",
      "test/mqtt/embedded-broker.test.ts",
      "test/http/auth.test.ts",
      "test/http/downloads.test.ts",
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
  ignorePatterns: ["data", "reports", "docs", "deploy", ".tmp", "*.log"],
  tempDirName: ".stryker-tmp",
  cleanTempDir: true,
};
