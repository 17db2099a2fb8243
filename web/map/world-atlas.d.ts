/** The world outline shipped by `world-atlas` (TopoJSON), bundled into the page by esbuild. */
declare module 'world-atlas/land-110m.json' {
  import type { Topology } from 'topojson-specification';
  const land: Topology;
  export default land;
}
