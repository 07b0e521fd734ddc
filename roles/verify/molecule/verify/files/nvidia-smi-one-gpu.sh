#!/bin/sh
# TEST DOUBLE of nvidia-smi (molecule scenario `verify` only): answers the layer-1 query with
# ONE NVIDIA H200 (the recorded 2x H200 host's GPU 0), whatever it is asked.
echo "0, NVIDIA H200, 9.0, 580.159.04, 143771, 00000000:00:06.0"
