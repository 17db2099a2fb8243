import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

import type { Response } from 'express';
import { z } from 'zod';
import { MICROS_PER_DAY, formatMicros } from '../../../shared/time.ts';
import { InvalidRequest, Unprocessable } from '../errors.ts';
import { param, userOf, type RequestContext } from '../http/context.ts';
import { timestamp } from '../http/inputs.ts';
import { DEFAULT_LIMIT, MAX_LIMIT, decodeCursor, encodeCursor } from '../http/pagination.ts';
import type { RouteDef } from '../http/route-table.ts';
import { parseInput } from '../http/validate.ts';
import { csvLines } from './csv.ts';
import type { MeasurementsService, Point, SeriesQuery } from './measurements.service.ts';
import { AGG_FNS, AGG_WIDTHS, type Agg } from './rollups.ts';
import type { Clock } from '../clock.ts';

const MAX_CHANNELS = 50;

const seriesFields = {
  from: timestamp.optional(),
  to: timestamp.optional(),
  agg: z.enum(Object.keys(AGG_WIDTHS) as [Agg, ...Agg[]]).optional(),
  fn: z.enum(AGG_FNS).optional(),
  limit: z.coerce.number().int().min(1).max(MAX_LIMIT).optional(),
  cursor: z.string().max(1024).optional(),
};

const ChannelQuery = z.object({ ...seriesFields, format: z.enum(['json', 'csv']).optional() });
/** No `cursor`: it pages one channel (`next_cursor` of a series goes to that channel's route). */
const { cursor: _cursor, ...manyFields } = seriesFields;
const ManyQuery = z.object({
  ...manyFields,
  channel_ids: z.union([z.string(), z.array(z.string())]).optional(),
});

type SeriesInput = z.output<z.ZodObject<typeof seriesFields>>;

/**
 * The range and bucketing of a read. Defaults: the last 24 hours, raw points, `fn=mean`.
 * `to <= from` is 422 `invalid_range`; `fn` without `agg` is 400 (it would silently do nothing).
 */
function seriesQuery(q: SeriesInput, nowMicros: number): SeriesQuery {
  const to = q.to ?? nowMicros;
  const from = q.from ?? to - MICROS_PER_DAY;
  if (q.fn !== undefined && q.agg === undefined) {
    throw new InvalidRequest('invalid_request', 'fn applies to aggregated reads: add agg', [
      { path: 'fn', message: 'needs agg' },
    ]);
  }
  if (to <= from) {
    throw new Unprocessable('invalid_range', 'to must be later than from (from is inclusive, to exclusive)', [
      { path: 'to', message: 'not later than from' },
    ]);
  }
  return { from, to, width: q.agg === undefined ? null : AGG_WIDTHS[q.agg], fn: q.fn ?? 'mean' };
}

/**
 * Where a page starts: the range's `from`, or after the previous page's last point (a raw point's
 * ts, or a bucket's start). A cursor is bound to its channel.
 */
function pageStart(series: SeriesQuery, cursor: string | undefined, channelId: string): number {
  const key = decodeCursor(cursor);
  if (key === null) return series.from;
  if (key[1] !== channelId) {
    throw new InvalidRequest('invalid_request', 'this cursor belongs to another channel', [
      { path: 'cursor', message: 'issued for another channel' },
    ]);
  }
  return Math.max(series.from, key[0] + (series.width ?? 1));
}

function pointView(p: Point) {
  return { ts: formatMicros(p.ts), value: p.value };
}

/**
 * `text/csv` with the header `ts,value`, every point of the range, written chunk by chunk as it is
 * read (`csvLines` on each chunk; `pipeline` waits for the socket when it is slow).
 */
async function sendCsv(ctx: RequestContext, res: Response, name: string, chunks: AsyncIterable<Point[]>) {
  res.status(200).set({
    'Content-Type': 'text/csv; charset=utf-8',
    'Content-Disposition': `attachment; filename="${name}.csv"`,
  });
  const text = Readable.from(
    (async function* () {
      yield csvLines([['ts', 'value']]);
      for await (const chunk of chunks) yield csvLines(chunk.map((p) => [formatMicros(p.ts), p.value]));
    })(),
    { objectMode: false },
  );
  try {
    await pipeline(text, res);
  } catch (err) {
    // The status is sent: a cut-off body (the socket is destroyed) is the only honest signal left.
    ctx.log.error({ err }, 'CSV stream failed');
    res.destroy();
  }
}

/** What these routes use; the composition root passes them in. */
export interface MeasurementRoutesDeps {
  measurements: MeasurementsService;
  clock: Clock;
}

export function measurementRoutes(s: MeasurementRoutesDeps): RouteDef[] {
  const { measurements, clock } = s;
  const readErrors = ['channel_not_found', 'invalid_request', 'invalid_range'];
  return [
    {
      method: 'get',
      path: '/v1/channels/:channel_id/measurements',
      auth: 'user',
      family: 'read',
      summary:
        'Measurements of a channel: raw points or aggregated buckets (agg, fn), paged; format=csv streams the whole range',
      query: ChannelQuery,
      success: { status: 200, description: 'list envelope of {ts, value}, or text/csv with format=csv' },
      errors: readErrors,
      handler: async (req, res) => {
        const user = userOf(req.ctx);
        const channel = await measurements.channel(user.accountId, param(req, 'channel_id'));
        const q = parseInput(ChannelQuery, req.query, 'query');
        const series = seriesQuery(q, clock.nowMicros());
        if (q.format === 'csv') {
          if (q.limit !== undefined || q.cursor !== undefined) {
            throw new InvalidRequest(
              'invalid_request',
              'format=csv streams the whole range: drop limit and cursor',
              [{ path: q.cursor !== undefined ? 'cursor' : 'limit', message: 'not with format=csv' }],
            );
          }
          await sendCsv(req.ctx, res, channel.channel_id, measurements.stream(channel.seq, series));
          return undefined;
        }
        const limit = q.limit ?? DEFAULT_LIMIT;
        const start = pageStart(series, q.cursor, channel.channel_id);
        const page = await measurements.page(channel.seq, series, start, limit);
        const last = page.points[page.points.length - 1];
        return {
          status: 200,
          body: {
            data: page.points.map(pointView),
            next_cursor: page.hasMore && last ? encodeCursor([last.ts, channel.channel_id]) : null,
            has_more: page.hasMore,
          },
        };
      },
    },
    {
      method: 'get',
      path: '/v1/measurements',
      auth: 'user',
      family: 'read',
      summary:
        'Measurements of up to 50 channels at once: {data: {<channel_id>: [{ts, value}]}}, each series at most limit points',
      query: ManyQuery,
      success: {
        status: 200,
        description:
          '{data, has_more, next_cursor}, each keyed by channel id (next_cursor pages on the channel route)',
      },
      errors: readErrors,
      handler: async (req) => {
        const user = userOf(req.ctx);
        // `channel_ids=a,b` or, as some clients send lists, `channel_ids=a&channel_ids=b`.
        const given: unknown = req.query.channel_ids;
        const raw = Array.isArray(given) ? given.join(',') : typeof given === 'string' ? given : '';
        const ids = [...new Set(raw.split(',').map((id) => id.trim()))].filter((id) => id.length > 0);
        if (ids.length === 0 || ids.length > MAX_CHANNELS) {
          throw new InvalidRequest('invalid_request', `channel_ids must name 1 to ${MAX_CHANNELS} channels`, [
            { path: 'channel_ids', message: ids.length === 0 ? 'required' : `more than ${MAX_CHANNELS}` },
          ]);
        }
        const channels = await measurements.channels(user.accountId, ids);
        const q = parseInput(ManyQuery, req.query, 'query');
        if (req.query.cursor !== undefined) {
          throw new InvalidRequest(
            'invalid_request',
            'cursor pages one channel: use next_cursor on /v1/channels/{id}/measurements',
            [{ path: 'cursor', message: 'not on this route' }],
          );
        }
        const series = seriesQuery(q, clock.nowMicros());
        const limit = q.limit ?? DEFAULT_LIMIT;
        const data: Record<string, ReturnType<typeof pointView>[]> = {};
        const hasMore: Record<string, boolean> = {};
        const nextCursor: Record<string, string | null> = {};
        for (const channel of channels) {
          const page = await measurements.page(channel.seq, series, series.from, limit);
          const last = page.points[page.points.length - 1];
          data[channel.channel_id] = page.points.map(pointView);
          hasMore[channel.channel_id] = page.hasMore;
          nextCursor[channel.channel_id] =
            page.hasMore && last ? encodeCursor([last.ts, channel.channel_id]) : null;
        }
        return { status: 200, body: { data, has_more: hasMore, next_cursor: nextCursor } };
      },
    },
  ];
}
