import { describeScenarios } from './scenarios.ts';

/** Chaos, short form (./scenarios.ts): ingest offered more than the cloud sustains. */
describeScenarios(['overload']);
