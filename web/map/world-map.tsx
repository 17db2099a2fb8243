import { geoNaturalEarth1, geoPath, geoGraticule10 } from 'd3-geo';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { feature } from 'topojson-client';
import type { GeometryCollection } from 'topojson-specification';
import land from 'world-atlas/land-110m.json';
import { formatValue, KIND_NAMES } from './format.ts';
import type { Pin } from './public-api.ts';

const WIDTH = 960;
const HEIGHT = 500;
const MAX_ZOOM = 32;
/** A pin's dot and the round area that takes its click or tap, in screen pixels at any zoom. */
const PIN_PX = 5;
const HIT_PX = 10;
/** Pins' values are written beside them once the world is this many screen pixels wide. */
const VALUES_WORLD_PX = 640;
const VALUES_WORLD_PX_CROWDED = 3_000;

/** The projection and the land outline, computed once: the world fits the SVG's viewBox. */
const projection = geoNaturalEarth1().fitExtent(
  [
    [4, 4],
    [WIDTH - 4, HEIGHT - 4],
  ],
  { type: 'Sphere' },
);
const path = geoPath(projection);
const LAND = path(feature(land, land.objects.land as GeometryCollection)) ?? '';
const SPHERE = path({ type: 'Sphere' }) ?? '';
const GRATICULE = path(geoGraticule10()) ?? '';

interface View {
  x: number;
  y: number;
  w: number;
}

/**
 * The world outline (world-atlas, drawn with d3-geo) and a pin per sensor, coloured by kind, its
 * latest value beside it once zoomed in. Zoom with the buttons or the wheel, pan by dragging; a pin
 * is a button (click, Enter or Space opens it).
 */
export function WorldMap(props: { pins: Pin[]; selected: string | null; onSelect: (id: string) => void }) {
  const [view, setView] = useState<View>({ x: 0, y: 0, w: WIDTH });
  const drag = useRef<{ px: number; py: number; view: View; moved: boolean } | null>(null);
  /** Whether the last press moved the map: its click then opens no pin. */
  const dragged = useRef(false);
  const svg = useRef<SVGSVGElement>(null);
  /** The map's width on screen: pins, values and strokes are sized in screen pixels from it. */
  const [screenWidth, setScreenWidth] = useState(WIDTH);
  useEffect(() => {
    const el = svg.current;
    if (!el) return;
    const measure = () => setScreenWidth(el.clientWidth || WIDTH);
    measure();
    const observer = new ResizeObserver(measure);
    observer.observe(el);
    return () => observer.disconnect();
  }, []);
  const zoom = WIDTH / view.w;
  const h = view.w * (HEIGHT / WIDTH);
  /** SVG user units per screen pixel at this zoom. */
  const unit = view.w / screenWidth;

  /** Each pin's point, and its place in a ring around it when several sensors share a position. */
  const placed = useMemo(() => {
    const together = new Map<string, number>();
    for (const pin of props.pins)
      together.set(`${pin.lat},${pin.lon}`, (together.get(`${pin.lat},${pin.lon}`) ?? 0) + 1);
    const seen = new Map<string, number>();
    return props.pins.flatMap((pin) => {
      const xy = projection([pin.lon, pin.lat]);
      if (!xy) return [];
      const key = `${pin.lat},${pin.lon}`;
      const n = together.get(key)!;
      const i = seen.get(key) ?? 0;
      seen.set(key, i + 1);
      const angle = n > 1 ? (2 * Math.PI * i) / n - Math.PI / 2 : 0;
      return [{ pin, xy, ring: n > 1 ? ([Math.cos(angle), Math.sin(angle)] as const) : ([0, 0] as const) }];
    });
  }, [props.pins]);

  const zoomBy = (factor: number, cx = view.x + view.w / 2, cy = view.y + h / 2) => {
    const w = Math.min(WIDTH, Math.max(WIDTH / MAX_ZOOM, view.w / factor));
    const k = w / view.w;
    setView(clamp({ x: cx - (cx - view.x) * k, y: cy - (cy - view.y) * k, w }));
  };

  /** SVG user units per screen pixel, measured now (for pointer positions). */
  const scale = () => view.w / (svg.current?.clientWidth || WIDTH);

  const r = PIN_PX * unit;
  const worldPx = screenWidth * zoom;
  const showValues = worldPx >= (placed.length <= 60 ? VALUES_WORLD_PX : VALUES_WORLD_PX_CROWDED);
  return (
    <div class="world">
      <div class="zoom" role="group" aria-label="Zoom">
        <button type="button" aria-label="Zoom in" onClick={() => zoomBy(2)}>
          +
        </button>
        <button type="button" aria-label="Zoom out" onClick={() => zoomBy(0.5)}>
          −
        </button>
        <button
          type="button"
          aria-label="Show the whole world"
          onClick={() => setView({ x: 0, y: 0, w: WIDTH })}
        >
          ⟲
        </button>
      </div>
      <svg
        ref={svg}
        class="world-svg"
        viewBox={`${view.x} ${view.y} ${view.w} ${h}`}
        role="group"
        aria-label={`World map with ${placed.length} sensors`}
        onWheel={(e) => {
          e.preventDefault();
          const rect = svg.current!.getBoundingClientRect();
          const s = scale();
          zoomBy(
            e.deltaY < 0 ? 1.25 : 0.8,
            view.x + (e.clientX - rect.left) * s,
            view.y + (e.clientY - rect.top) * s,
          );
        }}
        onPointerDown={(e) => {
          drag.current = { px: e.clientX, py: e.clientY, view, moved: false };
          dragged.current = false;
        }}
        onPointerMove={(e) => {
          const d = drag.current;
          if (!d) return;
          const dx = e.clientX - d.px;
          const dy = e.clientY - d.py;
          if (!d.moved && Math.hypot(dx, dy) < 4) return;
          d.moved = true;
          dragged.current = true;
          const s = scale();
          setView(clamp({ x: d.view.x - dx * s, y: d.view.y - dy * s, w: d.view.w }));
        }}
        onPointerUp={() => {
          drag.current = null;
        }}
        onPointerLeave={() => {
          drag.current = null;
        }}
      >
        <path class="sphere" d={SPHERE} />
        <path class="graticule" d={GRATICULE} style={{ strokeWidth: 0.5 / zoom }} />
        <path class="land" d={LAND} style={{ strokeWidth: 0.6 / zoom }} />
        {placed.map(({ pin, xy: [px, py], ring }) => {
          // Sensors of one device sit in a ring, far enough apart that each dot's centre takes its own click.
          const x = px + ring[0] * r * 2.2;
          const y = py + ring[1] * r * 2.2;
          const label = `${pin.nickname}, ${pin.locationName}: ${KIND_NAMES[pin.kind]}${pin.label ? ` (${pin.label})` : ''} ${formatValue(pin.value, pin.unit)}`;
          const open = () => props.onSelect(pin.id);
          return (
            <g
              key={pin.id}
              class={`pin kind-${pin.kind}${props.selected === pin.id ? ' selected' : ''}`}
              transform={`translate(${x} ${y})`}
              role="button"
              tabIndex={0}
              aria-label={label}
              data-pin-id={pin.id}
              onClick={() => {
                if (!dragged.current) open();
              }}
              onKeyDown={(e) => {
                if (e.key === 'Enter' || e.key === ' ') {
                  e.preventDefault();
                  open();
                }
              }}
            >
              <title>{label}</title>
              <circle class="hit" r={HIT_PX * unit} />
              <circle class="dot" r={r} style={{ strokeWidth: 1.2 * unit }} />
              {showValues ? (
                <text x={r * 1.5} y={r * 0.6} style={{ fontSize: `${11 * unit}px`, strokeWidth: 3 * unit }}>
                  {formatValue(pin.value, pin.unit)}
                </text>
              ) : null}
            </g>
          );
        })}
      </svg>
      <ul class="legend" aria-label="Pin colours">
        {(Object.keys(KIND_NAMES) as (keyof typeof KIND_NAMES)[]).map((k) => (
          <li key={k}>
            <span class={`swatch kind-${k}`} aria-hidden="true" /> {KIND_NAMES[k]}
          </li>
        ))}
      </ul>
    </div>
  );
}

/** Keeps the view inside the map. */
function clamp(v: View): View {
  const h = v.w * (HEIGHT / WIDTH);
  return {
    w: v.w,
    x: Math.min(WIDTH - v.w, Math.max(0, v.x)),
    y: Math.min(HEIGHT - h, Math.max(0, v.y)),
  };
}
