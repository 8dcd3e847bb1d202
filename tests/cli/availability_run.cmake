# Devices that are not always online: a trace file (device 1 online in two intervals, device 3
# from 0.2 s) and the diurnal model (each device online half of every 10 minutes, from its own
# phase). With --join-timeout-s the runs start without the absent devices and complete; frames to
# offline devices are dropped and counted.
#   cmake -DEDGESGD=path -DWORK_DIR=dir -P availability_run.cmake
include(${CMAKE_CURRENT_LIST_DIR}/summary_figures.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
file(WRITE ${WORK_DIR}/trace.txt "# device start_s end_s\n1 0 0.5\n1 1.0 2.0\n3 0.2 5  # late\n")
edgesgd_simulate(traced --data synthetic --workers 4 --rounds 30 --round-deadline-s 0.05
                 --join-timeout-s 0.1 --availability trace:${WORK_DIR}/trace.txt)
edgesgd_simulate(diurnal --data synthetic --workers 20 --participation 0.5 --rounds 30
                 --round-deadline-s 2 --join-timeout-s 5 --availability diurnal:600,0.5)
foreach(run traced diurnal)
  file(READ ${WORK_DIR}/${run}.json summary)
  string(JSON rounds GET "${summary}" final round)
  string(JSON dropped GET "${summary}" network frames_dropped_offline)
  message(STATUS "${run}: ${rounds} rounds, ${dropped} frames dropped offline")
  if(NOT rounds EQUAL 30 OR dropped EQUAL 0)
    message(FATAL_ERROR "${run}: expected 30 rounds and frames dropped at offline devices")
  endif()
endforeach()
