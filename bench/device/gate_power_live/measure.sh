# shellcheck shell=bash
# measure.sh TAG PER STOP TMO: PER runs per cell at once, each its own venv/double; trials appended to /tmp/o/pN.jsonl
TAG=$1 PER=$2 STOP=$3 TMO=$4
CELLS=${CELLS:-"3:0:0 3:0:10 3:10:0 3:10:10 5:0:0 5:0:10 5:10:0 5:10:10 5:10:20"}
(while :; do echo "$(date -u +%T) $(cat /proc/loadavg)"; sleep 30; done) > $OUT/loadavg-$TAG.txt &
LOADPID=$!
i=0; pids=""
for c in $CELLS; do
  IFS=: read cv d r <<< "$c"
  for k in $(seq 1 $PER); do
    i=$((i+1)); mkvenv $i || exit 1
    timeout $TMO /tmp/r$i/venv/bin/python bench/gate_power_live.py --trials 40 --stop-after-s $STOP \
      --cvs $cv --drifts $d --regressions $r $ARGS --out /tmp/o/$TAG-p$i.txt > /tmp/o/$TAG-p$i.log 2>&1 &
    pids="$pids $!"
  done
done
echo "$(date -u +%T) started $i runs"
wait $pids
echo "$(date -u +%T) all ended; rc of timeout not kept"
echo "$(date -u +%T) end $(cat /proc/loadavg)" >> $OUT/loadavg-$TAG.txt
kill $LOADPID
cat /tmp/o/$TAG-p*.jsonl > $OUT/trials-$TAG.jsonl 2>/dev/null
for f in /tmp/o/$TAG-p*.log; do echo "== $f"; grep -c '^{' $f; grep -v '^{' $f | tail -n 8; done > $OUT/logs-$TAG.txt
wc -l $OUT/trials-$TAG.jsonl
