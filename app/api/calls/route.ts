export { GET, POST } from "@/server/http/calls-api";
