#!/usr/bin/env bash
# Two "machines" as Linux network namespaces, each with a veth pair to this host, each
# running a worker that reaches PostgreSQL over the host's veth address (not localhost):
# the job is submitted from the host, both workers run its chunks, the output is checked
# frame for frame against one pass. Needs root, iproute2, ffmpeg, postgresql, the release build.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$ROOT/.build/release/upscale
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
WORK=$(mktemp -d /tmp/upscale-netns-XXXXXX); chmod 755 "$WORK"
PGDIR=$WORK/pg; mkdir -p "$PGDIR"; chown postgres "$PGDIR"
PORT=5499
cleanup() {
  for n in 1 2; do ip netns del upnode$n 2>/dev/null || true; ip link del upveth$n 2>/dev/null || true; done
  (cd "$PGDIR" && runuser -u postgres -- "$PGBIN/pg_ctl" -D "$PGDIR/data" -m immediate stop >/dev/null 2>&1) || true
  rm -rf "$WORK"
}
trap cleanup EXIT
for n in 1 2; do
  ip netns add upnode$n
  ip link add upveth$n type veth peer name eth0 netns upnode$n
  ip addr add 10.77.$n.1/24 dev upveth$n; ip link set upveth$n up
  ip netns exec upnode$n ip addr add 10.77.$n.2/24 dev eth0
  ip netns exec upnode$n ip link set eth0 up; ip netns exec upnode$n ip link set lo up
  ip netns exec upnode$n ip route add default via 10.77.$n.1
done
(cd "$PGDIR" && runuser -u postgres -- "$PGBIN/initdb" -D "$PGDIR/data" -U upscale -A trust --no-sync >/dev/null)
echo "host all all 10.77.0.0/16 trust" >> "$PGDIR/data/pg_hba.conf"
(cd "$PGDIR" && runuser -u postgres -- "$PGBIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/log" -w \
  -o "-p $PORT -k $PGDIR -c listen_addresses=127.0.0.1,10.77.1.1,10.77.2.1" start >/dev/null)

ffmpeg -nostdin -v error -y -i "$ROOT/Samples/street.mp4" -c:v libx264 -crf 18 -g 10 -c:a copy "$WORK/clip.mp4"
OPTS=(--codec ffv1 --no-refine --threads 1)
"$BIN" "$WORK/clip.mp4" -o "$WORK/single.mkv" --chunk-seconds 0 --quiet "${OPTS[@]}"
mkdir -p "$WORK/out"
"$BIN" submit "$WORK/clip.mp4" -o "$WORK/out" --chunk-seconds 1 "${OPTS[@]}" --queue "postgres://upscale@127.0.0.1:$PORT/postgres"
for n in 1 2; do
  ip netns exec upnode$n "$BIN" worker --once --name node$n --queue "postgres://upscale@10.77.$n.1:$PORT/postgres" > "$WORK/node$n.log" 2>&1 &
done
wait
cat "$WORK"/node*.log | grep "^worker"
psql -h 127.0.0.1 -p $PORT -U upscale -d postgres -tAc "SELECT owner, count(*) FROM upscale_tasks GROUP BY owner ORDER BY owner"
psql -h 127.0.0.1 -p $PORT -U upscale -d postgres -tAc "SELECT client_addr FROM pg_stat_activity WHERE client_addr IS NOT NULL" | sort -u
for f in single.mkv "out/clip Upscaled.mkv"; do
  ffmpeg -nostdin -v error -i "$WORK/$f" -map 0:v -f framemd5 - | grep -v '^#' | awk -F, '{print $2, $6}' > "$WORK/$(basename "$f").md5"
done
if cmp -s "$WORK/single.mkv.md5" "$WORK/clip Upscaled.mkv.md5"; then echo "output: frame for frame equal to one pass"; else echo "output: DIFFERENT"; exit 1; fi
