import * as notes from "@codemode/servers/notes";

const { result } = await notes.list_notes()
let total = result.length as number
;[1, 2].forEach((n) => (total += n))
type Pair = [number, number]
const pair = [total, result.length] as Pair
;(pair as number[]).reverse()
interface Marker {}
globalThis.__codemode_result__ = pair
