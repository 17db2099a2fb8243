import { describeScenarios } from './scenarios.ts';

/** Chaos, short form (./scenarios.ts): the gateway and the cloud SIGKILLed under load. */
describeScenarios(['gateway-kill', 'cloud-kill']);
