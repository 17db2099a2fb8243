import { describe, expect, it } from '@jest/globals';
import { addressBudget } from '../../../cloud/src/http/client-address.ts';

describe('addressBudget', () => {
  it('is an IPv4 address itself, an IPv4-mapped one as IPv4, and an IPv6 address its /64', () => {
    expect(addressBudget('198.51.100.7')).toBe('198.51.100.7');
    expect(addressBudget('::ffff:198.51.100.7')).toBe('198.51.100.7');
    expect(addressBudget('2001:db8:1:2::1')).toBe('2001:db8:1:2::/64');
    expect(addressBudget('2001:0db8:0001:0002:ffff:1:2:3')).toBe('2001:db8:1:2::/64');
    expect(addressBudget('2001:db8:1:3::1')).toBe('2001:db8:1:3::/64');
    expect(addressBudget('unknown')).toBe('unknown');
  });
});
