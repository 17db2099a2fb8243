import { describeScenarios } from './scenarios.ts';

/** Chaos, short form (./scenarios.ts): the database stopped, the network cut, blackholed and slowed, and a long outage drained. */
describeScenarios(['pg-outage', 'network', 'outage-72h']);
