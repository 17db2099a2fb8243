export async function runPhysical(_file: string): Promise<number> {
  return 2;
}
