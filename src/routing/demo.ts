import type { Storage, StreamInput } from '../storage/index.ts';

/** A few flows that show each routing rule, so a new user sees redirects work in a minute. */
const DEMO: {
  slug: string;
  name: string;
  rotation: 'position' | 'weight';
  streams: Omit<StreamInput, 'flow_id'>[];
}[] = [
  {
    slug: 'demo',
    name: 'Demo: forced by country, then weighted, then default',
    rotation: 'weight',
    streams: [
      stream('Germany first', 'forced', 0, 100, 'https://example.com/de?country={country}&rid={request_id}', {
        countries_include: ['DE'],
      }),
      stream(
        'A (weight 3)',
        'regular',
        1,
        300,
        'https://example.com/a?flow={flow}&stream={stream}&aff_sub={click_id}&s1={sub1}',
        {
          countries_exclude: ['US'],
        },
      ),
      stream(
        'B (weight 1)',
        'regular',
        2,
        100,
        'https://example.com/b?flow={flow}&stream={stream}&aff_sub={click_id}&s1={sub1}',
        {},
      ),
      stream('Fallback', 'default', 3, 0, 'https://example.com/fallback', {}),
    ],
  },
  {
    slug: 'demo-position',
    name: 'Demo: first matching regular stream by position',
    rotation: 'position',
    streams: [
      stream('Europe', 'regular', 0, 100, 'https://example.org/eu', {
        countries_include: ['DE', 'FR', 'IT', 'ES', 'NL'],
      }),
      stream('Everyone else', 'regular', 1, 100, 'https://example.org/world', {}),
    ],
  },
];

function stream(
  name: string,
  type: StreamInput['type'],
  position: number,
  weight: number,
  target_url: string,
  filters: StreamInput['filters'],
): Omit<StreamInput, 'flow_id'> {
  return { name, type, position, weight, status: 'active', filters, target_url, redirect_code: 302 };
}

/** Creates the demo flows that do not exist yet; returns the slugs created. */
export async function seedDemo(storage: Storage): Promise<string[]> {
  const created: string[] = [];
  for (const d of DEMO) {
    if (await storage.flows.getBySlug(d.slug)) continue;
    const flow = await storage.flows.create({
      slug: d.slug,
      name: d.name,
      status: 'active',
      rotation: d.rotation,
    });
    for (const s of d.streams) await storage.streams.create({ ...s, flow_id: flow.id });
    await storage.publishInvalidation(d.slug).catch(() => {});
    created.push(d.slug);
  }
  return created;
}
