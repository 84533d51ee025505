# Prometheus textfile export, linked into sfd. Included from daemon/sfd/CMakeLists.txt.
add_library(sfdprom STATIC ${CMAKE_CURRENT_LIST_DIR}/prom_export.c)
target_include_directories(sfdprom PUBLIC ${CMAKE_CURRENT_LIST_DIR} ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(sfdprom PUBLIC m)
if(TARGET sfcore)
  target_link_libraries(sfdprom PUBLIC sfcore)
endif()
