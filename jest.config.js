/** Jest runs the TypeScript sources directly through SWC as native ESM (see README, "Tests"). */
export default {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  extensionsToTreatAsEsm: ['.ts'],
  transform: {
    '^.+\\.ts$': [
      '@swc/jest',
      {
        jsc: { parser: { syntax: 'typescript' }, target: 'es2022' },
        module: { type: 'es6' },
      },
    ],
  },
  globalSetup: '<rootDir>/test/global-setup.mjs',
  testTimeout: 30000,
  maxWorkers: 2,
};
