#!/usr/bin/env bash
# System packages the suite and the pictures need: a CJK font for 猫 吃 鱼 labels,
# Debian's chromium for the browser test, and the fortunes, Jargon File and WordNet texts. Installed only when missing and only as root.
set -u
need=()
fc-list 2>/dev/null | grep -qi "Noto Sans CJK" || need+=(fonts-noto-cjk)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# Real text for the corpora of data/corpora.py (issue 10): English and Chinese fortunes.
[ -f /usr/share/games/fortunes/fortunes ] || need+=(fortunes)
[ -f /usr/share/games/fortunes/tang300 ] || need+=(fortunes-zh)
# The LM texts of the time-to-quality suite (issue 32, bench/real/prepare.py): the Jargon File, WordNet's definitions.
[ -f /usr/share/doc/jargon-text/jargon.txt.gz ] || need+=(jargon-text)
[ -f /usr/share/wordnet/data.noun ] || need+=(wordnet-base)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}") >/dev/null 2>&1 \
      || echo "warning: could not install ${need[*]}; CJK labels or the browser test may be unavailable" >&2
  else
    echo "warning: missing ${need[*]} (install them with apt-get as root)" >&2
  fi
fi
exit 0
