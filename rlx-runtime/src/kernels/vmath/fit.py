"""Regenerates the polynomial coefficients of rlx-runtime/src/kernels/vmath
(near-minimax fits with mpmath.chebyfit, coefficients rounded to the type;
prints the fit's error with the rounded coefficients). Run: python3 fit.py
"""
import mpmath as mp
mp.mp.dps = 60
import struct
def f32(v):
    return struct.unpack('f', struct.pack('f', float(v)))[0]
def fit(name, f, a, b, n, prec):
    c, err = mp.chebyfit(f, [a, b], n, error=True)
    rnd = (lambda v: f32(v)) if prec == 32 else (lambda v: float(v))
    cs = [rnd(v) for v in c]
    # max error with rounded coeffs (relative to value of f at ends)
    m = 0
    for i in range(2001):
        x = a + (b - a) * i / 2000
        p = mp.mpf(0)
        for v in cs:
            p = p * x + v
        e = abs(p - f(x))
        m = max(m, e)
    print(f"// {name} deg {n-1} on [{mp.nstr(a,6)}, {mp.nstr(b,6)}] abs err {mp.nstr(m,3)}")
    print("[" + ", ".join(repr(v) for v in reversed(cs)) + "]  // low to high")
L2 = mp.log(2)/2
def expP(r):
    if abs(r) < mp.mpf('1e-20'): return mp.mpf(1)/2
    return (mp.exp(r) - 1 - r)/r**2
fit("exp P f32", expP, -L2, L2, 5, 32)
fit("exp P f64", expP, -L2, L2, 10, 64)
fit("exp P f64 9", expP, -L2, L2, 9, 64)
zmax = ((mp.sqrt(2)-1)/(mp.sqrt(2)+1))**2
def lnP(z):
    if z < mp.mpf('1e-30'): return mp.mpf(2)/3
    s = mp.sqrt(z)
    return (2*mp.atanh(s)/s - 2)/z
fit("ln P f32", lnP, 0, zmax, 2, 32)
fit("ln P f32 3", lnP, 0, zmax, 3, 32)
fit("ln P f64", lnP, 0, zmax, 7, 64)
fit("ln P f64 6", lnP, 0, zmax, 6, 64)
q = (mp.pi/4)**2
def S(z):
    if z < mp.mpf('1e-30'): return -mp.mpf(1)/6
    r = mp.sqrt(z); return (mp.sin(r) - r)/(r**3)
def C(z):
    if z < mp.mpf('1e-30'): return mp.mpf(1)/24
    r = mp.sqrt(z); return (mp.cos(r) - 1 + z/2)/(z*z)
fit("sin S f64", S, 0, q, 6, 64)
fit("cos C f64", C, 0, q, 6, 64)
fit("sin S f32-in-f64", S, 0, q, 4, 64)
fit("cos C f32-in-f64", C, 0, q, 4, 64)
def E(z):
    if z < mp.mpf('1e-30'): return 2/mp.sqrt(mp.pi)
    x = mp.sqrt(z); return mp.erf(x)/x
for n in (7,8,9):
    fit(f"erf E f32-in-f64 {n}", E, 0, 1, n, 64)
def F(t):
    x = 1/t
    return mp.erfc(x)*mp.exp(x*x)
for n in (8,10,12):
    fit(f"erfcx(1/t) on t in [0.25,1] {n}", F, mp.mpf(1)/4, 1, n, 64)
