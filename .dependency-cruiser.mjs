/**
 * The import graph's rules (docs/architecture.md, "Layers of the cloud"). `npm run lint:deps`
 * checks them, and test/architecture/import-graph.test.ts fails on any violation. Type-only imports
 * count: they are edges of the graph like any other.
 *
 * Layers of the cloud, from the bottom:
 *   shared/               what the cloud and the gateway both speak; imports libraries only
 *   base                  cloud/src/{clock,errors,logger}.ts
 *   infrastructure        cloud/src/config.ts, storage/, jobs/, limits/, mail/, pki/, hub/
 *   HTTP edge             cloud/src/http/
 *   resources, ways in    every other folder of cloud/src (<name>.routes -> .service -> .repository)
 *   composition root      cloud/src/{services,routes,app,cloud,main}.ts
 * Each layer imports only the layers below it. A new folder of cloud/src is a resource folder
 * without any change here.
 */

const BASE = '^cloud/src/(clock|errors|logger)[.]ts$';
const INFRASTRUCTURE = '^cloud/src/(config[.]ts$|(storage|jobs|limits|mail|pki|hub)/)';
const HTTP = '^cloud/src/http/';
const ROOT = '^cloud/src/(services|routes|app|cloud|main)[.]ts$';
/** A folder of cloud/src that is neither the HTTP edge nor infrastructure: a resource or way in. */
const RESOURCE = '^cloud/src/(?!(http|storage|jobs|limits|mail|pki|hub)/)[^/]+/';

export default {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'No import cycles, type-only ones included: each layer and folder reads from the bottom up.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'shared-imports-libraries-only',
      severity: 'error',
      comment: 'shared/ is what both programs speak: it imports neither of them.',
      from: { path: '^shared/' },
      to: { path: '^(cloud|gateway|hardware|scripts|test)/' },
    },
    {
      name: 'gateway-not-cloud',
      severity: 'error',
      comment: 'The gateway and the cloud share only shared/.',
      from: { path: '^gateway/' },
      to: { path: '^cloud/' },
    },
    {
      name: 'cloud-not-gateway',
      severity: 'error',
      comment: 'The gateway and the cloud share only shared/.',
      from: { path: '^cloud/' },
      to: { path: '^gateway/' },
    },
    {
      name: 'gateway-parts-not-root',
      severity: 'error',
      comment:
        "The gateway's collectors, buffer and uplink never import gateway.ts or main.ts, which wire them.",
      from: { path: '^gateway/src/(collectors|buffer|uplink)/' },
      to: { path: '^gateway/src/(gateway|main)[.]ts$' },
    },
    {
      name: 'base-imports-shared-only',
      severity: 'error',
      comment: 'clock, errors and logger sit at the bottom of the cloud: they import shared/ only.',
      from: { path: BASE },
      to: { path: '^cloud/src/', pathNot: BASE },
    },
    {
      name: 'infrastructure-not-up',
      severity: 'error',
      comment: 'storage/, jobs/, limits/, mail/, pki/, hub/ and config.ts import the base and shared/ only.',
      from: { path: INFRASTRUCTURE },
      to: { path: `${HTTP}|${RESOURCE}|${ROOT}` },
    },
    {
      name: 'http-edge-not-up',
      severity: 'error',
      comment:
        'The HTTP edge (route table, validation, error envelope, request log) never reaches up: ' +
        'what it needs from a resource or the root it takes as an argument.',
      from: { path: HTTP },
      to: { path: `${RESOURCE}|${ROOT}` },
    },
    {
      name: 'resources-not-root',
      severity: 'error',
      comment:
        'Resource folders never import the composition root: each *Routes(...) and each service ' +
        'declares the narrow dependencies it uses, and the root passes them in.',
      from: { path: RESOURCE },
      to: { path: ROOT },
    },
    {
      name: 'routes-only-from-root',
      severity: 'error',
      comment: 'A *.routes.ts is mounted by the composition root (routes.ts) and imported by nothing else.',
      from: { path: '^cloud/src/', pathNot: ROOT },
      to: { path: '[.]routes[.]ts$' },
    },
    {
      name: 'services-not-routes',
      severity: 'error',
      comment: 'Inside a resource imports run routes -> service -> repository.',
      from: { path: '[.]service[.]ts$' },
      to: { path: '[.]routes[.]ts$' },
    },
    {
      name: 'repositories-below-services',
      severity: 'error',
      comment:
        'A repository is the SQL: it imports storage/, the base, shared/ and pure helpers, ' +
        'never a service, a route or the HTTP edge.',
      from: { path: '[.]repository[.]ts$' },
      to: { path: `[.](service|routes)[.]ts$|${HTTP}` },
    },
  ],
  options: {
    includeOnly: '^(cloud/src|gateway/src|shared)/',
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
