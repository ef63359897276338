#!/usr/bin/env bash
# 2 workers on one throwaway PostgreSQL queue, one killed with SIGKILL at a random moment,
# N times (default 20). Counts per run: the job finished, its output equal to the one-pass
# output frame for frame (FFV1, no refinement: framemd5), chunks redone (attempts > 1).
# Needs: the release build (make build), ffmpeg (to make the clip and the frame hashes),
# postgresql. Run as root or as a user allowed to run initdb.
set -euo pipefail
RUNS=${1:-20}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$ROOT/.build/release/upscale
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
WORK=$(mktemp -d /tmp/upscale-farmkill-XXXXXX)
chmod 755 "$WORK"
AS=""; [ "$(id -u)" = 0 ] && AS="runuser -u postgres --"
PGDIR=$WORK/pg; mkdir -p "$PGDIR"; [ -n "$AS" ] && chown postgres "$PGDIR"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
(cd "$PGDIR" && $AS "$PGBIN/initdb" -D "$PGDIR/data" -U upscale -A trust --no-sync >/dev/null)
(cd "$PGDIR" && $AS "$PGBIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/log" -w -o "-p $PORT -k $PGDIR -c listen_addresses=127.0.0.1" start >/dev/null)
trap '(cd "$PGDIR" && $AS "$PGBIN/pg_ctl" -D "$PGDIR/data" -m immediate stop >/dev/null 2>&1); rm -rf "$WORK"' EXIT
export UPSCALE_QUEUE="postgres://upscale@127.0.0.1:$PORT/postgres" UPSCALE_LEASE_SECONDS=3
PSQL="psql -h 127.0.0.1 -p $PORT -U upscale -d postgres -tAq"

# The street clip with a keyframe every second: 6 chunks of 1 s.
ffmpeg -nostdin -v error -y -i "$ROOT/Samples/street.mp4" -c:v libx264 -crf 18 -g 10 -c:a copy "$WORK/clip.mp4"
OPTS=(--codec ffv1 --no-refine --threads 1)
"$BIN" "$WORK/clip.mp4" -o "$WORK/single.mkv" --chunk-seconds 0 --quiet "${OPTS[@]}"
ffmpeg -nostdin -v error -i "$WORK/single.mkv" -map 0:v -f framemd5 - | grep -v '^#' | awk -F, '{print $2, $6}' > "$WORK/single.md5"

done_ok=0; wrong=0; lost=0; redone=0; killed_holding=0
for run in $(seq 1 "$RUNS"); do
  $PSQL -c "DELETE FROM upscale_jobs" 2>/dev/null || true
  rm -rf "$WORK/out"; mkdir -p "$WORK/out"
  "$BIN" submit "$WORK/clip.mp4" -o "$WORK/out" --chunk-seconds 1 "${OPTS[@]}" >/dev/null
  "$BIN" worker --once --quiet --name a >/dev/null 2>&1 & A=$!
  "$BIN" worker --once --quiet --name b >/dev/null 2>&1 & B=$!
  sleep "$(python3 -c "import random; print(round(random.uniform(0.3, 6), 2))")"
  VICTIM=$A; [ $((RANDOM % 2)) = 0 ] && VICTIM=$B
  holding=$($PSQL -c "SELECT count(*) FROM upscale_tasks WHERE state='running' AND owner LIKE '$([ $VICTIM = $A ] && echo a || echo b)/%'")
  kill -9 $VICTIM 2>/dev/null || true
  wait $A $B 2>/dev/null || true
  # A victim killed before the other started its last wait leaves the rest to a fresh worker.
  "$BIN" worker --once --quiet --name c >/dev/null 2>&1
  state=$($PSQL -c "SELECT state FROM upscale_jobs")
  again=$($PSQL -c "SELECT count(*) FROM upscale_tasks WHERE idx >= 0 AND attempts > 1")
  redone=$((redone + again)); killed_holding=$((killed_holding + holding))
  if [ "$state" != done ]; then lost=$((lost + 1)); echo "run $run: job $state"; continue; fi
  ffmpeg -nostdin -v error -i "$WORK/out/clip Upscaled.mkv" -map 0:v -f framemd5 - | grep -v '^#' | awk -F, '{print $2, $6}' > "$WORK/out.md5"
  if cmp -s "$WORK/single.md5" "$WORK/out.md5"; then done_ok=$((done_ok + 1)); else wrong=$((wrong + 1)); echo "run $run: output differs"; fi
  echo "run $run: victim held $holding chunk(s), $again chunk(s) redone"
done
echo "runs $RUNS: outputs exact $done_ok, outputs wrong $wrong, jobs not finished $lost; chunks held by the killed worker $killed_holding, chunks run again $redone"
