/** A slow random walk, so emulated sensors look like a fridge or a room rather than noise. */
export class Drift {
  private value: number;
  constructor(
    start: number,
    private readonly step: number,
    private readonly min: number,
    private readonly max: number,
    private readonly decimals = 1,
  ) {
    this.value = start;
  }

  next(): number {
    this.value = Math.min(this.max, Math.max(this.min, this.value + (Math.random() * 2 - 1) * this.step));
    const f = 10 ** this.decimals;
    return Math.round(this.value * f) / f;
  }
}

export interface ClimateValues {
  temperature: number;
  humidity: number;
  battery: number;
}

export function climate(startTemp = 4): () => ClimateValues {
  const t = new Drift(startTemp, 0.3, startTemp - 5, startTemp + 5, 2);
  const h = new Drift(60, 2, 30, 90, 1);
  let battery = 100;
  return () => ({
    temperature: t.next(),
    humidity: h.next(),
    battery: (battery = Math.max(5, battery - 0.01)),
  });
}
