import csv, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
h = next((i for i, r in enumerate(rows) if any(c == "Source" for c in r)), None)
if h is None:
    print("no header", rows[:8]); sys.exit()
hdr = rows[h]
print(len(hdr), hdr[:40])
def col(name):
    return next((j for j, c in enumerate(hdr) if c.startswith(name)), None)
ja, js = col("Address"), col("Source")
jw = col("Warp Stall Sampling (All Samples)")
print("cols", ja, js, jw)
body = [r for r in rows[h + 1:] if len(r) == len(hdr)]
def num(x):
    try: return float(x.replace(",", ""))
    except: return 0.0
tot = sum(num(r[jw]) for r in body)
print("total samples", tot, "instructions", len(body))
for idx, r in enumerate(body):
    if num(r[jw]) >= 0.01 * tot:
        print(idx, r[ja], f"{num(r[jw]):8.0f}", r[js][:110])
