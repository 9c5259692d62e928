"""The seed with every event/stat metadata id (keys, ids, references) shifted by 2^40.
Usage: python ids64.py IN.xplane.pb OUT.xplane.pb"""
import sys
SHIFT = 1 << 40
def varint(b, p):
    r = s = 0
    while True:
        x = b[p]; p += 1; r |= (x & 0x7f) << s; s += 7
        if x < 0x80: return r, p
def enc(v):
    v &= (1 << 64) - 1
    o = bytearray()
    while True:
        x = v & 0x7f; v >>= 7
        if v: o.append(x | 0x80)
        else: o.append(x); return bytes(o)
def fields(b):
    p = 0
    while p < len(b):
        k, p = varint(b, p); t = k & 7; st = p
        if t == 0: v, p = varint(b, p); yield k >> 3, t, v
        elif t == 1: p += 8; yield k >> 3, t, b[st:p]
        elif t == 5: p += 4; yield k >> 3, t, b[st:p]
        elif t == 2: l, p = varint(b, p); yield k >> 3, t, b[p:p + l]; p += l
        else: raise ValueError(t)
def rebuild(b, f):
    out = bytearray()
    for num, t, v in fields(b):
        v = f(num, t, v)
        out += enc(num << 3 | t)
        if t == 0: out += enc(v)
        elif t == 2: out += enc(len(v)) + v
        else: out += v
    return bytes(out)
def stat(b):  # XStat: metadata_id=1, ref_value=7
    return rebuild(b, lambda n, t, v: v + SHIFT if t == 0 and n in (1, 7) else v)
def event(b):  # XEvent: metadata_id=1, stats=4
    return rebuild(b, lambda n, t, v: v + SHIFT if (n, t) == (1, 0) else stat(v) if (n, t) == (4, 2) else v)
def line(b):  # XLine: events=4
    return rebuild(b, lambda n, t, v: event(v) if (n, t) == (4, 2) else v)
def emeta(b):  # XEventMetadata: id=1, stats=5, child_id=6
    def f(n, t, v):
        if t == 0 and n in (1, 6): return v + SHIFT
        if (n, t) == (5, 2): return stat(v)
        if (n, t) == (6, 2):  # packed child ids
            out = bytearray(); p = 0
            while p < len(v): x, p = varint(v, p); out += enc(x + SHIFT)
            return bytes(out)
        return v
    return rebuild(b, f)
def smeta(b):  # XStatMetadata: id=1
    return rebuild(b, lambda n, t, v: v + SHIFT if (n, t) == (1, 0) else v)
def entry(b, val):  # map entry: key=1, value=2
    return rebuild(b, lambda n, t, v: v + SHIFT if (n, t) == (1, 0) else val(v) if (n, t) == (2, 2) else v)
def plane(b):  # XPlane: lines=3, event_metadata=4, stat_metadata=5, stats=6
    def f(n, t, v):
        if t != 2: return v
        return {3: line, 4: lambda x: entry(x, emeta), 5: lambda x: entry(x, smeta), 6: stat}.get(n, lambda x: x)(v)
    return rebuild(b, f)
d = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(rebuild(d, lambda n, t, v: plane(v) if (n, t) == (1, 2) else v))
